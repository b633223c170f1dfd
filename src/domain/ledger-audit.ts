import type { LedgerEntry } from '../contract/ledger';
import { DESTRUCTIVE_ACTIONS } from '../contract/vocabulary';
import { addMs, durationMs, msBetween } from './duration';

/*
 * The ledger auditor: the invariants every ledger keeps, whoever wrote it, checked over what a
 * store holds (docs/architecture.md "The ledger"; DESIGN.md "Rules that no shortcut may break").
 * The test suite runs it over every SQLite and PostgreSQL ledger it writes (test/helpers/
 * ledger-audit.ts) and fails on any finding. Pure: the caller reads the rows.
 *
 * Per run chain (workflow_id, chain_id), in seq order:
 * - seq counts 1, 2, 3, … with no gap and no repeat;
 * - CONVERGED only from a fresh observation: the entry's own, or, for a note (observation_fresh
 *   false), the chain's last entry with a fresh observation, which judged the same generation and
 *   digest CONVERGED. A note copying CONVERGED onto new content manufactures it;
 * - RETRY only while the retry budget lasts (attempt_count below retry_budget), and, where the
 *   policy sets repair_deadline, only for a retry (not_before) before the episode's deadline;
 * - nothing carried out in an episode after an entry of it said REPAIR_DEADLINE_EXCEEDED;
 * - no action authorized in observe mode (the host's or the resource's), on an OPERATOR_OWNED or
 *   UNKNOWN resource, on a resource the operator yielded, and no destructive action at all.
 */

/** One row of a store: the entry and the run chain it belongs to (the store's chain_id column). */
export interface AuditedRow {
  chain_id: string;
  entry: LedgerEntry;
}

export interface LedgerFinding {
  node: string;
  workflow_id: string;
  chain_id: string;
  seq: number;
  rule:
    | 'SEQ'
    | 'CONVERGED_WITHOUT_OBSERVATION'
    | 'RETRY_PAST_BUDGET'
    | 'RETRY_PAST_DEADLINE'
    | 'ACTION_AFTER_DEADLINE'
    | 'ACTION_NOT_ALLOWED';
  detail: string;
}

const DESTRUCTIVE: ReadonlySet<string> = new Set(DESTRUCTIVE_ACTIONS);

export function auditLedger(rows: readonly AuditedRow[]): LedgerFinding[] {
  const chains = new Map<string, AuditedRow[]>();
  for (const row of rows) {
    const key = `${row.entry.workflow_id}\u0000${row.chain_id}`;
    const chain = chains.get(key) ?? [];
    chain.push(row);
    chains.set(key, chain);
  }
  const findings: LedgerFinding[] = [];
  for (const chain of chains.values()) findings.push(...auditChain(chain.sort((a, b) => a.entry.seq - b.entry.seq)));
  return findings;
}

function auditChain(chain: readonly AuditedRow[]): LedgerFinding[] {
  const findings: LedgerFinding[] = [];
  let lastFresh: LedgerEntry | null = null;
  const pastDeadline = new Set<string>();
  chain.forEach(({ chain_id, entry }, i) => {
    const found = (rule: LedgerFinding['rule'], detail: string) =>
      findings.push({ node: entry.node_id, workflow_id: entry.workflow_id, chain_id, seq: entry.seq, rule, detail });
    if (entry.seq !== i + 1)
      found('SEQ', `seq ${entry.seq} is entry ${i + 1} of its chain: ${entry.seq > i + 1 ? 'a gap before it' : 'a repeat'}`);
    if (entry.convergence_status === 'CONVERGED') {
      const why = convergedWithout(entry, lastFresh);
      if (why) found('CONVERGED_WITHOUT_OBSERVATION', why);
    }
    if (entry.convergence_status === 'RETRY' && entry.attempt_count >= entry.retry_budget)
      found(
        'RETRY_PAST_BUDGET',
        `RETRY (${entry.reason}) at attempt ${entry.attempt_count} of retry_budget ${entry.retry_budget}`,
      );
    for (const detail of actionsNotAllowed(entry)) found('ACTION_NOT_ALLOWED', detail);
    const deadline = deadlineBroken(entry, pastDeadline);
    if (deadline) found(deadline.rule, deadline.detail);
    if (entry.observation_fresh) lastFresh = entry;
  });
  return findings;
}

/** Why this CONVERGED is not backed by a fresh observation of its generation and digest, or null when it is. */
function convergedWithout(entry: LedgerEntry, lastFresh: LedgerEntry | null): string | null {
  if (entry.observation_fresh) return null;
  const said = `CONVERGED (${entry.reason}) for generation ${entry.desired_generation} digest ${entry.desired_digest}`;
  if (!lastFresh) return `${said} with no fresh observation in the chain before it`;
  if (lastFresh.desired_generation !== entry.desired_generation || lastFresh.desired_digest !== entry.desired_digest)
    return `${said}, but the last fresh observation (seq ${lastFresh.seq}) judged generation ${lastFresh.desired_generation} digest ${lastFresh.desired_digest}`;
  if (lastFresh.convergence_status !== 'CONVERGED')
    return `${said}, but the last fresh observation (seq ${lastFresh.seq}) judged it ${lastFresh.convergence_status}`;
  return null;
}

/**
 * A RETRY for after its episode's repair_deadline, or an action carried out in an episode an
 * earlier entry ended with REPAIR_DEADLINE_EXCEEDED (`ended` collects those episodes' starts).
 */
function deadlineBroken(
  entry: LedgerEntry,
  ended: Set<string>,
): { rule: 'RETRY_PAST_DEADLINE' | 'ACTION_AFTER_DEADLINE'; detail: string } | null {
  const episode = entry.repair_episode;
  if (!episode) return null;
  const endsAt = addMs(episode.started_at, durationMs(episode.repair_deadline));
  const notBefore = entry.recheck_trigger.not_before;
  const carriedOut = entry.execution_evidence.filter((ev) => ev.outcome !== 'refused' && ev.outcome !== 'skipped');
  const wasEnded = ended.has(episode.started_at);
  if (entry.reason === 'REPAIR_DEADLINE_EXCEEDED') ended.add(episode.started_at);
  if (entry.convergence_status === 'RETRY' && notBefore !== null && msBetween(notBefore, endsAt) <= 0)
    return {
      rule: 'RETRY_PAST_DEADLINE',
      detail: `RETRY (${entry.reason}) not before ${notBefore}, at or after the deadline ${endsAt} of the episode that began ${episode.started_at} (repair_deadline ${episode.repair_deadline})`,
    };
  if (wasEnded && carriedOut.length > 0)
    return {
      rule: 'ACTION_AFTER_DEADLINE',
      detail: `${carriedOut.map((ev) => `${ev.action} on "${ev.resource_key}"`).join(', ')} carried out in the episode that began ${episode.started_at}, after an entry of it said REPAIR_DEADLINE_EXCEEDED`,
    };
  return null;
}

/** Each authorized action the entry's own record says must not have been authorized. */
function actionsNotAllowed(entry: LedgerEntry): string[] {
  const out: string[] = [];
  const resources = new Map(entry.resources.map((r) => [r.resource_key, r]));
  const yielded = new Set((entry.operator_decisions ?? []).filter((d) => d.kind === 'yield').map((d) => d.resource_key));
  for (const a of entry.authorized_actions) {
    const what = `${a.action} on "${a.resource_key}" authorized`;
    if (DESTRUCTIVE.has(a.action)) out.push(`${what}: a destructive action`);
    if (entry.mode === 'observe') out.push(`${what} in observe mode`);
    const r = resources.get(a.resource_key);
    if (r?.effective_mode === 'observe' && entry.mode !== 'observe') out.push(`${what} while the resource is in observe mode`);
    if (r && r.ownership !== 'MANAGED') out.push(`${what} on an ${r.ownership} resource`);
    if (yielded.has(a.resource_key)) out.push(`${what} on a resource the operator yielded`);
  }
  return out;
}

/** One line per finding, for an error message. */
export function findingLine(f: LedgerFinding): string {
  return `${f.node} ${f.workflow_id} (chain ${f.chain_id}) seq ${f.seq}: ${f.rule}: ${f.detail}`;
}
