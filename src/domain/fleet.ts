import { canonicalJson, sha256Hex, type Json } from './canonical';
import { addMs, durationMs, formatDuration, msBetween } from './duration';
import { withFix } from '../contract/fix';
import {
  FLEET_WORKFLOW_ID,
  FLEET_GRACE_MIN_MS,
  FLEET_GRACE_SHARE,
  type FleetCondition,
  type FleetConditionDraft,
  type FleetConditionType,
  type FleetCounts,
  type FleetView,
  type MissingLoop,
} from '../contract/fleet';
import { FLEET_LOOK, workItemId, type PassReport, type WorkTargetInput } from '../contract/work';
import { isWorkCondition } from './work-rules';
import type { Policy } from '../contract/desired';
import type { Resolver } from '../contract/vocabulary';

/*
 * The fleet's conditions (seed 004: the controller notices "an owner gone silent"), as pure
 * functions of what one look saw: the authority's nodes, the running loops, the declared nodes
 * without one. The fleet workflow (src/workflows/fleet.ts) holds them; a condition opens and
 * closes by what a look sees, never by a signal. Tested by table in test/unit/fleet.test.ts.
 */

/** A node the authority declares, as a look read its file. */
export interface DeclaredNode {
  node: string;
  /** Null when the file does not read as desired state (its loop says INVALID_DESIRED_STATE). */
  generation: number | null;
  digest: string | null;
  policy: Pick<Policy, 'resync_interval' | 'node_timeout' | 'observation_ttl' | 'backoff'> | null;
}

/** A running reconcile loop, as visibility shows it (search attributes and memo). */
export interface LoopSeen {
  node: string;
  workflow_id: string;
  generation: number;
  status: string | null;
  reason: string | null;
  last_verified_at: string | null;
  /** When the loop at this generation started. */
  since: string;
  /** The task queue its workflow tasks go to (its loop shard's, or the controller's own). */
  task_queue?: string;
}

/** A loop shard's queue no controller polls: `<base>-loops-<shard>`, base the controllers' own queue. */
export interface UnservedShard {
  queue: string;
  shard: number;
  base: string;
  /** Whether base is datum-control, the fleet's own controller queue. */
  fleet_queue: boolean;
}

export interface FleetSeen {
  declared: DeclaredNode[];
  loops: LoopSeen[];
  missing: MissingLoop[];
  now: string;
  /** How far the memo's last_verified_at may lag the loop's own (MEMO_VERIFIED_EVERY_MS). */
  memo_lag_ms: number;
  /** The loop shards' queues on which the server has seen no controller poll lately. */
  unserved_shards?: UnservedShard[];
}

/** Policy defaults where a file does not read: the bound is then the defaults' (docs/configuration.md). */
const DEFAULT_BOUND_POLICY = {
  resync_interval: '30s',
  node_timeout: '30s',
  observation_ttl: '60s',
  backoff: { initial: '5s', factor: 2, max: '5m' },
};

const WHO: Record<FleetConditionType, { resolver: Resolver; needs_judgement: boolean }> = {
  // Someone ended the loop, or nobody started one: whether the node is reconciled is a decision.
  NO_RUNNING_LOOP: { resolver: 'operator', needs_judgement: true },
  // A silent worker or agent is a repair of the infrastructure, not a decision about the node.
  VERIFICATION_OVERDUE: { resolver: 'operator', needs_judgement: false },
  // Decommissioned on purpose, or a file deleted by mistake: only a person knows.
  NO_DESIRED_STATE: { resolver: 'operator', needs_judgement: true },
  // A controller to start, or a shard to add to one: a repair of the infrastructure.
  LOOP_QUEUE_UNSERVED: { resolver: 'operator', needs_judgement: false },
};

function fleetDraft(
  type: FleetConditionType,
  node: string,
  workflowId: string | null,
  since: string | null,
  message: string,
  evidence: Json,
): FleetConditionDraft {
  return { node, type, workflow_id: workflowId, resource_key: null, since, message, evidence, tried: [], ...WHO[type] };
}

/**
 * How long a loop may go without verifying its node before it is overdue: the longest its loop
 * waits between passes (resync_interval, or a retry's backoff.max), the time an observation may
 * take (node_timeout to be picked up, observation_ttl to come back), and the memo's lag.
 */
export function verificationBoundMs(policy: DeclaredNode['policy'], memoLagMs: number): number {
  const p = policy ?? DEFAULT_BOUND_POLICY;
  const wait = Math.max(durationMs(p.resync_interval), durationMs(p.backoff.max));
  return wait + durationMs(p.node_timeout) + durationMs(p.observation_ttl) + memoLagMs;
}

/** The fleet's conditions and counts from one look. */
export function fleetConditions(seen: FleetSeen): { drafts: FleetConditionDraft[]; counts: FleetCounts } {
  const declared = new Map(seen.declared.map((d) => [d.node, d]));
  const drafts: FleetConditionDraft[] = seen.missing.map((m) => withoutLoop(m, declared.get(m.node)?.generation ?? null));
  let running = 0;
  let verified = 0;
  for (const loop of seen.loops) {
    const d = declared.get(loop.node);
    if (!d) {
      drafts.push(undeclared(loop));
      continue;
    }
    running++;
    const unserved = seen.unserved_shards?.find((u) => u.queue === loop.task_queue);
    if (unserved) drafts.push(unservedDraft(loop, unserved));
    const overdue = overdueDraft(loop, d, seen);
    if (overdue) drafts.push(overdue);
    else if (loop.last_verified_at !== null) verified++;
  }
  drafts.sort((a, b) => a.node.localeCompare(b.node) || a.type.localeCompare(b.type));
  return { drafts, counts: { declared: seen.declared.length, running, verified, loops: seen.loops.length } };
}

function withoutLoop(m: MissingLoop, generation: number | null): FleetConditionDraft {
  const evidence = { desired_generation: generation, end: m.end, last_loop: m.last_loop ? { ...m.last_loop } : null };
  return fleetDraft(
    'NO_RUNNING_LOOP',
    m.node,
    m.last_loop?.workflow_id ?? null,
    m.last_loop?.closed_at ?? null,
    missingLoopMessage(m, generation),
    evidence,
  );
}

function undeclared(loop: LoopSeen): FleetConditionDraft {
  return fleetDraft(
    'NO_DESIRED_STATE',
    loop.node,
    loop.workflow_id,
    null,
    withFix(
      `${loop.workflow_id} reconciles ${loop.node}, which the authority no longer declares (desired/nodes/${loop.node}.yaml is gone)`,
      `restore the file if ${loop.node} is still in the fleet; otherwise end its loop with \`temporal workflow cancel --workflow-id ${loop.workflow_id}\` (nothing on the node is removed)`,
    ),
    { workflow_id: loop.workflow_id, generation: loop.generation, status: loop.status, reason: loop.reason },
  );
}

function overdueDraft(loop: LoopSeen, d: DeclaredNode, seen: FleetSeen): FleetConditionDraft | null {
  const boundMs = verificationBoundMs(d.policy, seen.memo_lag_ms);
  const from = loop.last_verified_at ?? loop.since;
  if (msBetween(from, seen.now) <= boundMs) return null;
  const last = loop.last_verified_at ? `since ${loop.last_verified_at}` : `since it started at ${loop.since}`;
  const decided = loop.status ? `; its last decision was ${loop.status}${loop.reason ? `/${loop.reason}` : ''}` : '';
  return fleetDraft(
    'VERIFICATION_OVERDUE',
    loop.node,
    loop.workflow_id,
    addMs(from, boundMs),
    withFix(
      `${loop.workflow_id} has not verified ${loop.node} ${last}, past its bound of ${formatDuration(boundMs)}${decided}`,
      `check that ${loop.node}'s agent runs and serves datum-node-${loop.node}, and that a controller worker serves datum-control (\`datum describe ${loop.node}\` shows what the loop last decided)`,
    ),
    {
      workflow_id: loop.workflow_id,
      last_verified_at: loop.last_verified_at,
      loop_since: loop.since,
      bound: formatDuration(boundMs),
    },
  );
}

/**
 * A loop on a queue no controller polls: said at the first look that sees it, before its
 * verification falls overdue (issue 33: a loop shard no controller serves reported nothing until
 * then). The server forgets a poller some minutes after its last poll, which bounds how late a
 * controller that died is seen.
 */
function unservedDraft(loop: LoopSeen, { queue, shard, base, fleet_queue }: UnservedShard): FleetConditionDraft {
  const worker = `datum worker${fleet_queue ? '' : ` --task-queue ${base}`} --loop-shards N --serve-shards ${shard}`;
  const serve = `start a controller worker that serves shard ${shard}: \`${worker}\` with the fleet's shard count N, or without --serve-shards to serve every shard`;
  return fleetDraft(
    'LOOP_QUEUE_UNSERVED',
    loop.node,
    loop.workflow_id,
    null,
    withFix(
      `no controller worker polls ${queue}, where ${loop.workflow_id} runs: its next pass waits until one does`,
      `${serve}; \`temporal task-queue describe --task-queue ${queue}\` lists the queue's pollers`,
    ),
    { workflow_id: loop.workflow_id, task_queue: queue },
  );
}

/** One sentence an operator can act on: what is missing, how the last loop ended, and the fix. */
export function missingLoopMessage(m: MissingLoop, desiredGeneration: number | null): string {
  const gen = desiredGeneration === null ? 'G' : String(desiredGeneration);
  const fix = `roll it out with \`datum rollout start --generation ${gen} --nodes ${m.node}\``;
  const desired = desiredGeneration === null ? 'desired state' : `desired state at generation ${desiredGeneration}`;
  if (!m.last_loop) return withFix(`${m.node} has ${desired} but no reconcile loop has ever run for it`, fix);
  const l = m.last_loop;
  return withFix(
    `${m.node} has ${desired} but no running reconcile loop: ${l.workflow_id} ${l.how}${l.closed_at ? ` at ${l.closed_at}` : ''}`,
    fix,
  );
}

/** What a look's conditions are compared by: the same conditions give the same fingerprint. */
export function fleetFingerprint(drafts: FleetConditionDraft[]): string {
  return sha256Hex(canonicalJson(drafts));
}

/**
 * The conditions the fleet holds after a look. `since` is set when a condition first appears (its
 * evidence's time, else the look's) and kept after, unless the evidence shows a later episode: a
 * node that had a loop again between two looks, which ended again, lost its loop when that one ended.
 * One the look does not find is closed.
 */
export function mergeFleetConditions(
  previous: FleetCondition[],
  drafts: FleetConditionDraft[],
  lookedAt: string,
): FleetCondition[] {
  const key = (c: { node: string; type: string }) => `${c.node}\u0000${c.type}`;
  const before = new Map(previous.map((c) => [key(c), c]));
  return drafts.map((d) => {
    const kept = before.get(key(d))?.since;
    const later = kept !== undefined && d.since !== null && msBetween(kept, d.since) > 0;
    return { ...d, since: later ? d.since! : (kept ?? d.since ?? lookedAt) };
  });
}

/** The conditions with what resolvers decided about them as `tried`; decisions about closed conditions are dropped. */
export function withDecisions(
  conditions: FleetCondition[],
  decisions: Record<string, string>,
): { conditions: FleetCondition[]; decisions: Record<string, string> } {
  const kept: Record<string, string> = {};
  const shown = conditions.map((c) => {
    const id = workItemId(c.node, c.type, null);
    const decided = decisions[id];
    if (decided === undefined) return c;
    kept[id] = decided;
    return { ...c, tried: [decided] };
  });
  return { conditions: shown, decisions: kept };
}

/** Whether the fleet is watched at `now`: its last look is no older than its interval and the grace. */
export function fleetWatched(lookedAt: string | null, interval: string, now: string): boolean {
  if (lookedAt === null) return false;
  const intervalMs = durationMs(interval);
  const grace = Math.max(FLEET_GRACE_MIN_MS, intervalMs * FLEET_GRACE_SHARE);
  return msBetween(lookedAt, now) <= intervalMs + grace;
}

// ---------------------------------------------------------------------------------------------
// Judgement handed over as work (docs/work-items.md): each fleet condition that needs a decision
// opens a work item, told by the look that opens it and by the one that finds it gone.

/** What the fleet tells one node's work items after a look. */
export interface FleetWorkReport {
  report: PassReport;
  open: WorkTargetInput[];
  tell: string[];
}

/** A report of what look `view.looks` found about `node`: the fleet's conditions of the node, nothing else. */
export function fleetReport(view: FleetView, node: string): PassReport {
  const held = view.conditions.filter((c) => c.node === node);
  const generation = held.map(generationIn).find((g) => g !== null) ?? 0;
  return {
    node,
    loop: view.workflow_id,
    generation,
    digest: '',
    ledger_seq: view.looks,
    decided_at: view.looked_at ?? '',
    fresh: true,
    status: FLEET_LOOK,
    reason: FLEET_LOOK,
    reason_detail:
      held.length > 0
        ? held.map((c) => c.message).join(' ')
        : `The fleet's look #${view.looks} finds no fleet condition on ${node}.`,
    mode: null,
    retry_budget: 0,
    conditions: held.map(({ node: _node, workflow_id: _loop, ...c }) => c),
    resources: [],
  };
}

function generationIn(c: FleetCondition): number | null {
  const e = c.evidence;
  if (e === null || typeof e !== 'object' || Array.isArray(e)) return null;
  const g = e.desired_generation ?? e.generation;
  return typeof g === 'number' ? g : null;
}

/**
 * The items to open (a condition needing judgement the fleet has not told yet, once it has stood
 * for a whole interval) and to tell (an item it told whose condition the look no longer finds:
 * the report closes it), one report per node concerned; and the items the fleet tells from now on.
 *
 * The interval is what keeps a passing state from becoming work: a node declared a moment before
 * its rollout, or between the loop a hand-over ends and the one it starts, has no loop for one
 * look; status shows it at once, and a person is asked only if the next look still finds it.
 */
export function fleetWork(view: FleetView, known: string[]): { reports: FleetWorkReport[]; known: string[] } {
  const judged = view.conditions.filter((c) => c.needs_judgement && isWorkCondition(c.type));
  const standing = (c: FleetCondition) =>
    view.looked_at === null || msBetween(c.since, view.looked_at) >= durationMs(view.interval);
  const current = new Map(
    judged
      .filter((c) => known.includes(workItemId(c.node, c.type, null)) || standing(c))
      .map((c) => [workItemId(c.node, c.type, null), c]),
  );
  const byNode = new Map<string, FleetWorkReport>();
  const forNode = (node: string) => {
    const found = byNode.get(node) ?? { report: fleetReport(view, node), open: [], tell: [] };
    byNode.set(node, found);
    return found;
  };
  for (const [id, c] of current)
    if (!known.includes(id) && isWorkCondition(c.type)) forNode(c.node).open.push({ id, condition: c.type, resource_key: null });
  for (const id of known) {
    const node = nodeOfItem(id);
    if (!current.has(id) && node !== null) forNode(node).tell.push(id);
  }
  return { reports: [...byNode.values()], known: [...current.keys()] };
}

/** Whether a condition needing judgement has no item yet: the next look must tell the items again, changed or not. */
export function fleetWorkWaiting(view: FleetView, known: string[]): boolean {
  return view.conditions.some(
    (c) => c.needs_judgement && isWorkCondition(c.type) && !known.includes(workItemId(c.node, c.type, null)),
  );
}

/** The node of a work item id, `datum-work/<node>/<CONDITION>[/<resource_key>]`. */
function nodeOfItem(id: string): string | null {
  return /^datum-work\/([^/]+)\//.exec(id)?.[1] ?? null;
}

/** A report from the fleet workflow's look, not from a reconcile loop. */
export const isFleetReport = (report: Pick<PassReport, 'loop'>): boolean => report.loop === FLEET_WORKFLOW_ID;

/** Why a report that names the fleet is not what the fleet holds now, or null when it is. */
export function fleetReportMismatch(view: FleetView, report: PassReport): string | null {
  const now = fleetReport(view, report.node);
  const said = (r: PassReport) => canonicalJson(r.conditions.map((c) => [c.type, c.message]));
  if (said(now) === said(report)) return null;
  return `the fleet's view of ${report.node} is not what the report says (look #${report.ledger_seq}; the fleet is at look #${view.looks})`;
}
