import { ApplicationFailure } from '@temporalio/common';
import {
  InvalidAgentConfig,
  canonicalJson,
  kindOfAction,
  targetOfAction,
  type AuthorizedAction,
  type ExecutionEvidence,
  type Json,
} from '../../domain';
import { withFix, type ApplyRequest } from '../../contract';
import { claimOnApply, endDecisionsFor, guardFor, protecting, unboundEntries, type ClaimsFile } from '../node/claims';
import { resolveTarget, realRoot } from '../fs';
import { loadAgentConfig } from '../config';
import { AgentJournal, journalKey, withLock } from '../node/journal';
import { sameMarker } from '../markers';
import { assertJournalRoom } from '../node/retention';
import { providerOfAction, type ApplyResult, type AtWrite, type NodeContext } from '../providers';
import { AgentRefusal, toFailure } from '../refusal';
import { assertNode } from './assert-node';
import { untrustedIntent } from '../trust';
import { ACTION_CHECKS, type Refuse, type TargetScope } from './refusals';
import { targetNow, writtenBy } from './target';
import { staleGeneration, writeChecks } from './write-checks';
import { type AgentConfig, authorizedAction, executionEvidence } from '../../schemas';

/*
 * apply: one authorized action, carried out only once the agent's own checks pass, in numbered
 * steps (docs/architecture.md lists the refusals in the same order):
 *   1–2  agent.yaml readable, the right node, a well-formed action (here)
 *   2b   on a host that requires it: signed intent, for this node and generation, not expired,
 *        and planned by the signed document (../trust.ts), before anything on the node is read
 *   3–5  the refusal table: mode, ownership, decisions, destructive and unknown kinds (refusals.ts)
 *   6    the node's fence: nothing older than the newest generation accepted (write-checks.ts)
 *   7    the journal: a recorded result is answered, not done again (here)
 *   8–9  the snapshot is young enough, and the target's marker is the one planned (write-checks.ts)
 * then the provider's write, with 6, 8 and 9 checked again at its irreversible step, and the
 * result journalled.
 */

const now = () => new Date();

export async function applyAction(configPath: string, request: ApplyRequest): Promise<ExecutionEvidence> {
  // One apply at a time per agent: the fence check, the action and the fence update are one step.
  return await withLock(configPath, () => applyLocked(configPath, request));
}

async function applyLocked(configPath: string, request: ApplyRequest): Promise<ExecutionEvidence> {
  const raw = request.action as Partial<AuthorizedAction> | undefined;
  const kind = typeof raw?.action === 'string' ? raw.action : '(no action)';
  const key = typeof raw?.resource_key === 'string' ? raw.resource_key : '(no resource)';
  const what = `${kind} of "${key}" on node ${request.node}`;
  const context: Record<string, Json> = {
    node: request.node,
    resource_key: key,
    action: kind,
    idempotency_key: raw?.idempotency_key ?? null,
  };
  const refuse: Refuse = (type, problem, fix, facts = {}) =>
    toFailure(new AgentRefusal(type, withFix(problem, fix), facts), what, context);

  // 1. The operator's configuration, read now.
  const config = await configForApply(configPath, refuse);
  // 2. The right node, and a well-formed action.
  assertNode(config, request.node, configPath, what);
  const parsed = authorizedAction.safeParse(request.action);
  if (!parsed.success)
    throw refuse(
      'InvalidAction',
      `the action is malformed (${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')})`,
      're-plan from the desired state',
    );
  const action = parsed.data;
  // 2b. Before the root is read and before the fence moves: what is not signed intent never
  // reaches the node (a forged generation would otherwise fence it, a forged path be resolved).
  const unsigned = untrustedIntent(config, request.signed, action, now());
  if (unsigned) throw refuse(unsigned.type, unsigned.problem, unsigned.fix, unsigned.facts);
  // 3–5. What this host's operator allows: mode, ownership, decisions, never destroy, known
  // actions; judged by the target the action writes, whatever key it comes under.
  try {
    const scope = await targetScope(config, action);
    for (const check of ACTION_CHECKS) {
      const refusal = check(config, action, configPath, scope);
      if (refusal) throw refuse(refusal.type, refusal.problem, refusal.fix, refusal.facts);
    }
    const evidence = await fenceJournalAndAct(config, action, refuse, scope.target);
    if (evidence.outcome === 'applied') await claimTarget(config, action, scope);
    return evidence;
  } catch (err) {
    // A provider, the fence or the journal found a path, an artifact or an obstruction it must
    // not touch: refused here, with the same subject as every other refusal.
    if (err instanceof AgentRefusal) throw toFailure(err, what, context);
    throw err;
  }
}

/** An agent that cannot read its own trust settings acts on nothing. */
async function configForApply(configPath: string, refuse: Refuse): Promise<AgentConfig> {
  try {
    return await loadAgentConfig(configPath);
  } catch (err) {
    if (!(err instanceof InvalidAgentConfig)) throw err;
    throw refuse(
      'InvalidAgentConfig',
      `agent.yaml is invalid, and an agent that cannot read its own trust settings acts on nothing:\n${err.message}`,
      `correct ${configPath}; the next action re-reads it`,
    );
  }
}

/** What the action writes (by identity: where the write lands now) and what protects it. */
async function targetScope(config: AgentConfig, action: AuthorizedAction): Promise<TargetScope> {
  const spelled = targetOfAction(action.action, action.resource_key, action.spec);
  const root = await realRoot(config.root, false);
  const target = spelled === null ? null : await resolveTarget(root, spelled);
  const guard = await guardFor(root, config, {}, null, now());
  return {
    target,
    spelled,
    entries: protecting(guard, action.resource_key, target),
    decision: target === null ? null : (guard.decisions.targets[target] ?? null),
    sharedWith: target === null ? [] : sharingKeys(guard.claims, action, target),
    unbound: unboundEntries(guard),
  };
}

/** Other keys of the action's generation whose resources write the same target (another spelling of it). */
function sharingKeys(claims: ClaimsFile, action: AuthorizedAction, target: string): string[] {
  return Object.entries(claims.keys)
    .filter(([key, k]) => key !== action.resource_key && k.target === target && k.generation === action.desired_generation)
    .map(([key]) => key)
    .sort();
}

/** After a write: the key claims the target, and a decision about another value of it is over. */
async function claimTarget(config: AgentConfig, action: AuthorizedAction, scope: TargetScope): Promise<void> {
  if (scope.target === null) return;
  const root = await realRoot(config.root, true);
  await claimOnApply(root, action.resource_key, scope.target, action.desired_generation, now());
  await endDecisionsFor(root, scope.target, writtenBy(action));
}

async function fenceJournalAndAct(
  config: AgentConfig,
  action: AuthorizedAction,
  refuse: Refuse,
  judged: string | null,
): Promise<ExecutionEvidence> {
  const root = await realRoot(config.root, true);
  const ctx: NodeContext = { node: config.node, root, services: config.services, config, judged };
  const journal = new AgentJournal(ctx.root);
  // 6. Per-node fencing: once generation G observed or acted on this node (any resource), nothing
  // older writes. Checked now, and again at the write itself (writeChecks).
  const stale = staleGeneration(action.desired_generation, await journal.acceptedGeneration(), config.node);
  if (stale) throw refuse(stale.type, stale.problem, stale.fix, stale.facts);
  // G is accepted once its action passes the fence, whatever the checks below decide: the agent
  // has seen newer intent, so an older generation's action queued behind this one never acts.
  await journal.accept(action, now());
  // 7. Idempotency: a recorded result is answered, not re-done. Before the checks below: our own
  // write moved the marker, and a retry of it is not a new write.
  const recorded = await journal.lookup(journalKey(action));
  if (recorded) return executionEvidence.parse({ ...recorded.evidence, outcome: 'replayed' });

  // 8–9. What the plan saw must still hold at the moment of the write: checked now, before any
  // work, and again with 6 at the write itself (atWrite).
  const { planHolds, atWrite } = writeChecks(ctx, action, journal, refuse);
  // An earlier attempt that wrote and died before journalling it moved the marker itself: when
  // its write is what is there now, it is recorded, not refused as another writer, nor redone.
  const landed = await landedEarlier(ctx, action, journal);
  if (landed) return await recordApplied(journal, action, landed);
  await planHolds();

  await journal.intend(action, now());
  let result: ApplyResult;
  try {
    result = await carryOut(ctx, action, atWrite);
  } catch (err) {
    // A refusal wrote nothing: no earlier attempt for a retry to find. Any other failure may have
    // written part way (a service spawned), so its record stays for the retry to judge.
    if (err instanceof AgentRefusal || err instanceof ApplicationFailure) await journal.unintend(action);
    throw err;
  }
  return await recordApplied(journal, action, result);
}

async function recordApplied(journal: AgentJournal, action: AuthorizedAction, result: ApplyResult): Promise<ExecutionEvidence> {
  const executedAt = now();
  const evidence = executionEvidence.parse({
    resource_key: action.resource_key,
    action: action.action,
    idempotency_key: action.idempotency_key,
    outcome: 'applied',
    executed_at: executedAt.toISOString(),
    marker_after: result.marker_after,
    detail: result.detail,
    refusal: null,
  });
  await journal.record(action, evidence, executedAt);
  return evidence;
}

/**
 * The write of an earlier attempt of this very action (same journal key) that started and was
 * never journalled (the agent died in between), when the target now holds exactly what the
 * action writes under a marker other than the planned one; null otherwise.
 */
async function landedEarlier(ctx: NodeContext, action: AuthorizedAction, journal: AgentJournal): Promise<ApplyResult | null> {
  if (!(await journal.intended(action))) return null;
  const seen = await targetNow(ctx, action);
  if (sameMarker(seen.marker, action.observed_marker)) return null;
  if (!holdsWhatActionWrites(action, seen.value)) {
    // Only its first part landed (a unit file written, no restart yet): Datum's own write, so the
    // re-check reads the plan as out of date and the loop plans the rest, rather than a CONFLICT.
    if (seen.marker !== null && partlyLanded(action, seen.value)) await journal.noteOwnWrite(action, seen.marker, now());
    return null;
  }
  return {
    marker_after: seen.marker,
    detail: `an earlier attempt of this action wrote it and ended before recording it: the target already holds what it writes (marker ${seen.marker ?? 'none'}), so it is recorded now and not done again.`,
  };
}

/** Whether `value` shows the first part of the action's write in place (ResourceKind.partlyLanded). */
function partlyLanded(action: AuthorizedAction, value: Json): boolean {
  const spec = action.spec;
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return false;
  return kindOfAction(action.action)?.partlyLanded?.(action.action, spec, value) ?? false;
}

/** Whether `value` (the provider's observe spelling) is what the action's write leaves. */
function holdsWhatActionWrites(action: AuthorizedAction, value: Json): boolean {
  const spec = action.spec;
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return false;
  const after = kindOfAction(action.action)?.valueAfter(action.action, spec);
  return after !== undefined && canonicalJson(value) === canonicalJson(after);
}

async function carryOut(ctx: NodeContext, action: AuthorizedAction, atWrite: AtWrite): Promise<ApplyResult> {
  const provider = providerOfAction(action.action);
  if (provider === null) throw new AgentRefusal('InvalidAction', `${action.action} has no provider`);
  // Only new actions reach here (a replay is answered from the journal): room for its entry first.
  await assertJournalRoom(ctx.root, now());
  return await provider.apply(ctx, action, atWrite);
}
