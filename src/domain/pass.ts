import type { AuthorityView, DecideInput, DecideResult, DecisionRule } from './decide';
import { decide } from './decide';
import { evidenceOfFailure, evidenceOfSkip, type ApplyFailure } from './loop';
import type { BoundIntent } from '../contract/desired';
import type { History } from '../contract/history';
import type { AuthorizedAction, ExecutionEvidence } from '../contract/ledger';
import type { Observation } from '../contract/observation';

/** A snapshot from the node, or why there is none. */
export interface Snapshot {
  observation: Observation | null;
  unreachable: string | null;
}

/**
 * What a pass needs from the world. The workflow backs these with activities (the node's agent,
 * the authority); the unit tests back them with fixtures, so both run this same pass.
 */
export interface PassPorts {
  observe(): Promise<Snapshot>;
  readAuthority(): Promise<AuthorityView>;
  /** `last`: no action of the pass comes after this one, so the snapshot after it may be the probe. */
  apply(action: AuthorizedAction, position: { last: boolean }): Promise<ExecutionEvidence | ApplyFailure>;
  now(): string;
  /** When the loop's resync timer is due, where one runs (DecideInput.resync_at); default: none. */
  resyncAt?(): string | null;
  /** Whether a decision rule added after a loop started is in force for it (the workflow asks patched()); default: yes. */
  ruleInForce?(rule: DecisionRule): boolean;
}

/** What a pass decided before acting (first) and, when it acted, on the fresh probe (final). */
export interface PassOutcome {
  first: DecideResult;
  final: DecideResult;
}

/**
 * One pass of the loop:
 *   1. observe: a fresh snapshot from the node itself;
 *   2. re-read the authority after observing and before deciding, so no action runs on intent
 *      older than the snapshot it was planned from;
 *   3. decide on the snapshot: the gates, then which planned actions are authorized;
 *   4. act: each authorized action in plan order, stopping at the first that fails or is
 *      refused (the rest are recorded as skipped: they may depend on it);
 *   5. probe: a fresh post-action snapshot, the only thing that can show convergence;
 *   6. judge the probe against what was done.
 */
export async function runPass(ports: PassPorts, intent: BoundIntent, history: History): Promise<PassOutcome> {
  const pre = await ports.observe();
  const authority = await ports.readAuthority();
  // Both judgements read the authority once, before acting: the probe is judged against the
  // intent the actions were planned under.
  const judge = (snapshot: Snapshot, acted?: DecideInput['acted']) =>
    decide({
      intent,
      authority,
      observation: snapshot.observation,
      unreachable: snapshot.unreachable,
      history,
      now: ports.now(),
      resync_at: ports.resyncAt?.() ?? null,
      rules: ports.ruleInForce?.bind(ports),
      acted,
    });
  const first = judge(pre);
  const actions = first.decision.authorized_actions;
  if (actions.length === 0 || !pre.observation) return { first, final: first };

  const evidence = await act(ports, actions);
  const final = judge(await ports.observe(), {
    planned: first.decision.planned_actions,
    actions,
    evidence,
    pre: pre.observation,
  });
  return { first, final };
}

async function act(ports: PassPorts, actions: AuthorizedAction[]): Promise<ExecutionEvidence[]> {
  const evidence: ExecutionEvidence[] = [];
  let stoppedBy: ExecutionEvidence | null = null;
  for (const [i, action] of actions.entries()) {
    if (stoppedBy) {
      evidence.push(evidenceOfSkip(action, stoppedBy, ports.now()));
      continue;
    }
    const answer = await ports.apply(action, { last: i === actions.length - 1 });
    const ev = 'kind' in answer ? evidenceOfFailure(action, answer, ports.now()) : answer;
    if ('kind' in answer) stoppedBy = ev;
    evidence.push(ev);
  }
  return evidence;
}
