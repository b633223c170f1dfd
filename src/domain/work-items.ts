import { canonicalJson, sha256Hex, type Json } from './canonical';
import {
  type LedgerRef,
  type PassReport,
  type WorkClaim,
  type WorkCondition,
  type WorkEpisode,
  type WorkItem,
  type WorkItemInput,
  type WorkResolution,
  type WorkState,
} from '../contract/work';
import { withFix } from '../contract/fix';
import { addMs, msBetween } from './duration';
import type { CheckedClaim, CheckedResolve } from './work-payloads';
import { allowedResolutions, ruleOf, type WorkFacts } from './work-rules';

/*
 * A work item's life, as pure functions of the item, what happened and the time (docs/work-items.md):
 * opened by a pass that found a condition needing judgement, claimed under a lease, resolved by
 * a resolution its rules allow, and closed only by a fresh observation that shows the condition
 * gone; reopened with the new evidence when the observation after a resolution still shows it.
 * The workflow (src/workflows/workItem.ts) only wires these to timers, signals and Updates.
 */

/** The ledger entries an item shows: the last few that led to it. */
const LEDGER_REFS = 10;

export function openWorkItem(id: string, input: WorkItemInput, now: string): WorkItem {
  const { report } = input;
  const empty: WorkItem = {
    id,
    node: input.node,
    condition: input.condition,
    resource_key: input.resource_key,
    state: 'OPEN',
    opened_at: now,
    reopened: 0,
    since: now,
    message: '',
    evidence: null,
    tried: [],
    resolver: 'operator',
    loop: report.loop,
    target: { generation: report.generation, digest: report.digest },
    mode: report.mode,
    retry_budget: report.retry_budget,
    resource: null,
    allowed: [],
    ledger: [],
    claim: null,
    resolution: null,
    resolutions: [],
    escalated_at: null,
    closed: null,
  };
  return withReport(empty, report);
}

// ---------------------------------------------------------------------------------------------
// Reports: what each recorded pass of the loop found.

export type ReportChange = 'evidence' | 'closed' | 'reopened' | 'none';

/** A report that may judge an item: a fresh observation, and a node not in the middle of a repair. */
export const reportSettles = (report: PassReport) => report.fresh && report.status !== 'RETRY';

const conditionIn = (item: Pick<WorkItem, 'condition' | 'resource_key'>, report: PassReport) =>
  report.conditions.find((c) => c.type === item.condition && c.resource_key === item.resource_key) ?? null;

/** The report came after the resolution was recorded: the loop's later entry, or another loop's. */
function afterResolution(resolution: WorkResolution, report: PassReport): boolean {
  return report.loop !== resolution.loop || report.ledger_seq > resolution.ledger_seq;
}

/**
 * Takes one report. A fresh, settled report without the condition closes the item; one with the
 * condition, after a resolution that was to clear it, reopens it with the new evidence (the
 * claim ends, the escalation clock starts again). Anything else only refreshes what it knows.
 */
export function takeReport(item: WorkItem, report: PassReport, now: string): { item: WorkItem; change: ReportChange } {
  if (item.state === 'CLOSED') return { item, change: 'none' };
  const seen = conditionIn(item, report);
  const judged = item.resolution !== null && afterResolution(item.resolution, report) && reportSettles(report);
  if (!seen) {
    if (!reportSettles(report) || (item.resolution && !afterResolution(item.resolution, report))) return { item, change: 'none' };
    return { item: close(withReport(item, report), report, now), change: 'closed' };
  }
  const updated = withReport(item, report);
  if (!judged || item.resolution!.expects === 'standing') return { item: updated, change: 'evidence' };
  const failed: WorkResolution = { ...item.resolution!, outcome: 'not cleared' };
  return {
    item: {
      ...updated,
      state: 'OPEN',
      opened_at: now,
      escalated_at: null,
      reopened: item.reopened + 1,
      claim: null,
      resolution: null,
      resolutions: [...item.resolutions.slice(0, -1), failed],
    },
    change: 'reopened',
  };
}

function close(item: WorkItem, report: PassReport, now: string): WorkItem {
  const resolution = item.resolution && { ...item.resolution, outcome: 'cleared' as const };
  const by = resolution ? `after ${resolution.by}'s ${resolution.resolution}` : 'before anyone resolved it';
  return {
    ...item,
    state: 'CLOSED',
    claim: null,
    resolution,
    resolutions: resolution ? [...item.resolutions.slice(0, -1), resolution] : item.resolutions,
    closed: {
      at: now,
      ledger_seq: report.ledger_seq,
      detail: `A fresh observation (${report.loop} #${report.ledger_seq}, ${report.status}/${report.reason}) shows ${describeItem(item)} cleared, ${by}.`,
    },
  };
}

/** What the item knows after a report: the condition's evidence, the node's facts, the entries that led here. */
function withReport(item: WorkItem, report: PassReport): WorkItem {
  const seen = conditionIn(item, report);
  const resource = item.resource_key ? (report.resources.find((r) => r.resource_key === item.resource_key) ?? null) : null;
  const facts: WorkFacts = { node: item.node, resource_key: item.resource_key, resource, report };
  const ref: LedgerRef = {
    seq: report.ledger_seq,
    decided_at: report.decided_at,
    status: report.status,
    reason: report.reason,
    reason_detail: report.reason_detail,
  };
  const ledger = item.ledger.some((r) => r.seq === ref.seq && r.decided_at === ref.decided_at)
    ? item.ledger
    : [...item.ledger, ref];
  return {
    ...item,
    ...(seen
      ? { since: seen.since, message: seen.message, evidence: seen.evidence, tried: seen.tried, resolver: seen.resolver }
      : {}),
    loop: report.loop,
    target: { generation: report.generation, digest: report.digest },
    mode: report.mode,
    retry_budget: report.retry_budget,
    resource,
    // Reports reach the items loops open, whose kind is always a loop's condition.
    allowed: allowedResolutions(item.condition as WorkCondition, facts),
    ledger: ledger.slice(-LEDGER_REFS),
  };
}

// ---------------------------------------------------------------------------------------------
// Claims: leases a resolver holds while it decides.

const liveClaim = (item: WorkItem, now: string): WorkClaim | null =>
  item.claim && msBetween(now, item.claim.until) > 0 ? item.claim : null;

/** Why a claim by `by` is refused now, or null. The same resolver may claim again to renew its lease. */
export function claimRefusal(item: WorkItem, by: string, now: string): string | null {
  const settled = settledRefusal(item);
  if (settled) return settled;
  const held = liveClaim(item, now);
  if (held && held.by !== by)
    return withFix(
      `${item.id} is claimed by ${held.by}${held.identity ? ` (${held.identity})` : ''} until ${held.until}`,
      `wait for the lease to end, or ask ${held.by} to release it (datum work release ${item.id} --by ${held.by})`,
    );
  return null;
}

/** The item claimed by `claim.by` until its lease ends, covering `episode` (the one it was claimed on) where known. */
export function claimWork(
  item: WorkItem,
  claim: CheckedClaim,
  identity: string | null,
  now: string,
  episode: WorkEpisode | null = null,
): WorkItem {
  const until = addMs(now, claim.lease_ms);
  return { ...item, state: 'CLAIMED', claim: { by: claim.by, identity, at: now, until, ...(episode ? { episode } : {}) } };
}

export function releaseRefusal(item: WorkItem, by: string, now: string): string | null {
  const held = liveClaim(item, now);
  if (!held) return withFix(`${item.id} is not claimed`, 'nothing to release');
  if (held.by !== by) return withFix(`${item.id} is claimed by ${held.by}, not ${by}`, `only ${held.by} releases it`);
  return null;
}

/** The claim ends (released, or its lease ran out): the item is open again, escalated if it was. */
export function unclaim(item: WorkItem): WorkItem {
  if (item.state !== 'CLAIMED') return { ...item, claim: null };
  return { ...item, claim: null, state: item.escalated_at ? 'ESCALATED' : 'OPEN' };
}

/** What the timers do at `now`: an expired lease ends, an item open past escalate_after escalates. */
export function tickWork(item: WorkItem, now: string, escalateAfterMs: number): WorkItem {
  let next = item;
  if (next.claim && !liveClaim(next, now)) next = unclaim(next);
  if (next.state === 'OPEN' && msBetween(next.opened_at, now) >= escalateAfterMs)
    next = { ...next, state: 'ESCALATED', escalated_at: now };
  return next;
}

/** When the timers next have something to do (ISO time), or null. */
export function nextDeadline(item: WorkItem, escalateAfterMs: number): string | null {
  if (item.claim) return item.claim.until;
  if (item.state === 'OPEN') return addMs(item.opened_at, escalateAfterMs);
  return null;
}

// ---------------------------------------------------------------------------------------------
// Resolutions.

function settledRefusal(item: WorkItem): string | null {
  if (item.state === 'PLANNING')
    return withFix(
      `${item.id} is being planned: ${item.node}'s agent has not said yet what would be removed`,
      `wait until \`datum work show ${item.id}\` lists it, then judge that`,
    );
  if (item.state === 'CLOSED') return withFix(`${item.id} is closed: ${item.closed?.detail ?? ''}`, 'nothing to do');
  if (item.state === 'AWAITING_OBSERVATION' && item.resolution)
    return withFix(
      `${item.id} was resolved by ${item.resolution.by} (${item.resolution.resolution}) at ${item.resolution.at} and waits for the observation that confirms it`,
      `follow it with \`datum work show ${item.id}\`; it reopens if the observation still shows the condition`,
    );
  return null;
}

/**
 * Why this resolution is refused now, or null: the item's state, another resolver's claim, a
 * resolution the condition does not allow, or one the node's agent.yaml or mode forbids.
 */
export function resolveRefusal(
  item: WorkItem,
  r: CheckedResolve,
  now: string,
  episode: WorkEpisode | null = null,
): string | null {
  const settled = settledRefusal(item) ?? claimRefusal(item, r.by, now);
  if (settled) return `resolve refused: ${settled}`;
  // What the resolver judged: the episode it sent, else the one its own claim covers.
  const held = liveClaim(item, now);
  const judged = r.episode ?? (held?.by === r.by ? (held.episode ?? null) : null);
  const moved = episode && judged ? episodeRefusal(item.id, judged, episode) : null;
  if (moved) return `resolve refused: ${moved}`;
  const allowed = item.allowed.find((a) => a.resolution === r.resolution);
  if (!allowed) {
    const choices = item.allowed.map((a) => `${a.resolution} (${a.does})`).join('; ');
    return `resolve refused: ${withFix(`${r.resolution} is not a resolution of ${item.condition}`, `choose one of: ${choices}`)}`;
  }
  if (allowed.refused) return `resolve refused: ${r.resolution} on ${describeItem(item)}: ${allowed.refused}`;
  if (r.resolution === 'grant' && (r.attempts ?? 0) > item.retry_budget)
    return `resolve refused: ${withFix(`grant ${r.attempts} is more than the retry_budget of ${item.retry_budget}`, `grant 1 to ${item.retry_budget}; grant again if they do not take`)}`;
  return null;
}

/** The loop recorded the resolution (its entry `seq`): the item waits for the observation, or holds. */
export function resolvedWork(
  item: WorkItem,
  r: CheckedResolve,
  identity: string | null,
  ack: { seq: number; loop: string },
  now: string,
): WorkItem {
  const rule = ruleOf(item.condition, r.resolution)!;
  const resolution: WorkResolution = {
    resolution: r.resolution,
    attempts: r.attempts,
    by: r.by,
    identity,
    note: r.note,
    at: now,
    ledger_seq: ack.seq,
    loop: ack.loop,
    expects: rule.expects,
    outcome: null,
  };
  const state: WorkState = rule.expects === 'standing' ? 'HELD' : 'AWAITING_OBSERVATION';
  return { ...item, state, claim: null, resolution, resolutions: [...item.resolutions, resolution] };
}

export const describeItem = (item: Pick<WorkItem, 'node' | 'condition' | 'resource_key'>) =>
  `${item.condition}${item.resource_key ? ` on "${item.resource_key}"` : ''} of ${item.node}`;

/** The one line the Web UI's workflow list shows for the item. */
export function itemSummary(item: WorkItem): string {
  const who = item.claim
    ? ` by ${item.claim.by}`
    : item.resolution
      ? ` (${item.resolution.resolution} by ${item.resolution.by})`
      : '';
  const choices = item.allowed.filter((a) => !a.refused).map((a) => a.resolution);
  const ask = item.state === 'OPEN' || item.state === 'ESCALATED' ? ` — resolve: ${choices.join('|') || 'see details'}` : '';
  return `${item.state}${who}: ${describeItem(item)}${ask}`;
}

// ---------------------------------------------------------------------------------------------
// Episodes: what a resolution is judged on.

/**
 * The facts an item's condition is decided on, digested: for another writer, the values it
 * writes (a retake judged about one writer never overrides the next); for a resource nobody is
 * proven to own or one only destruction would repair, what was observed there. Null where the
 * episode alone binds a resolution.
 */
function judgedFacts(item: Pick<WorkItem, 'condition' | 'evidence' | 'removal'>): string | null {
  // A removal is judged on exactly what the plan lists, each as it was read.
  if (item.condition === 'PLANNED_REMOVAL' && item.removal)
    return sha256Hex(canonicalJson(item.removal.targets.map((t) => [t.target, t.marker]))).slice(0, 16);
  const e = item.evidence as { sequence?: Array<{ value?: Json; source?: string }>; observed?: Json } | null;
  if (!e || typeof e !== 'object') return null;
  if (item.condition === 'CONFLICTING_WRITER' && Array.isArray(e.sequence)) {
    const values = [...new Set(e.sequence.filter((s) => s.source !== 'datum').map((s) => canonicalJson(s.value ?? null)))].sort();
    return sha256Hex(canonicalJson(values)).slice(0, 16);
  }
  if (item.condition === 'UNKNOWN_OWNERSHIP' || item.condition === 'DESTRUCTIVE_REPAIR_REQUIRED')
    return sha256Hex(canonicalJson(e.observed ?? null)).slice(0, 16);
  return null;
}

/** The episode a resolution must be judged on now: the run chain, the (re)opening, the facts. */
export function workEpisode(item: WorkItem, runId: string): WorkEpisode {
  return { run_id: runId, opened_at: item.opened_at, reopened: item.reopened, facts: judgedFacts(item) };
}

/** Why a resolution judged on `judged` may not be recorded on the episode `now`, naming what changed; null when they are one. */
export function episodeRefusal(id: string, judged: WorkEpisode, now: WorkEpisode): string | null {
  const look = `look again (datum work show ${id}) and resolve what it shows now`;
  if (judged.run_id !== now.run_id)
    return withFix(`${id} is a new episode since you judged it: the condition cleared and came back (run ${now.run_id})`, look);
  if (judged.opened_at !== now.opened_at || judged.reopened !== now.reopened)
    return withFix(
      `${id} reopened since you judged it (${judged.reopened} → ${now.reopened} times, last at ${now.opened_at}): the resolution before did not clear it`,
      look,
    );
  if (judged.facts !== now.facts)
    return withFix(`the facts of ${id} changed since you judged it (another value is there now)`, look);
  return null;
}
