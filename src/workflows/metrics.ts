/*
 * The workflow side of emitting Datum's own Prometheus metrics (their names are the contract's,
 * src/contract/metrics.ts). Workflow-safe: a sample leaves the sandbox through the METRICS_SINK
 * sink, which is neither a command nor recorded in history, and none is sent while replaying, so a
 * replayed pass does not count twice (the SDK's workflow meter does the same).
 *
 * The controller worker registers the sink and serves the samples next to the SDK's own
 * `temporal_*` metrics, labelled namespace, task_queue and workflow_type from the workflow's info
 * (src/worker/workflow-metrics.ts). The SDK's `metricMeter` is not used: the worker's meter behind
 * it adds camelCase `taskQueue` and `workflowType`, which would not join with core's series.
 */
import { proxySinks, workflowInfo } from '@temporalio/workflow';
import {
  CONVERGENCE_LATENCY_METRIC,
  DECISIONS_METRIC,
  DETECTION_LATENCY_METRIC,
  LEDGER_BACKLOG_METRIC,
  METRICS_SINK,
  OBSERVATION_AGE_METRIC,
  OPEN_CONDITIONS_METRIC,
  WORK_REPORTS_DROPPED_METRIC,
  type ConvergenceStart,
  type DatumMetricSinks,
  type MetricSample,
} from '../contract';
import { CONDITION_TYPES, msBetween, type ConditionType, type Decision, type LedgerEntry } from '../domain';

const sink = proxySinks<DatumMetricSinks>()[METRICS_SINK];

function emit(sample: MetricSample): void {
  if (workflowInfo().unsafe.isReplaying) return;
  sink.emit(sample);
}

/** A histogram in seconds; a metric must never fail a workflow task, so nothing not finite is sent. */
function seconds(name: string, help: string, value: number, labels: Record<string, string> = {}): void {
  if (!Number.isFinite(value)) return;
  // Clocks of two hosts meet in some of these (the agent's and the controller's): a histogram
  // refuses negative values, and a few milliseconds of skew read as 0.
  emit({ kind: 'histogram', name, unit: 's', help, valueType: 'float', value: Math.max(0, value), labels });
}

/** What the loop knew before this decision: the one before it, and the entries it recorded. */
export interface LoopMemory {
  /** The previous pass's or note's decision, written or not. */
  lastDecision: Decision | null;
  /** This generation's recorded entries, oldest first (the workflow keeps the last 50 to 100). */
  ledger: readonly LedgerEntry[];
}

/**
 * A pass judged a snapshot, whether or not the decision is recorded: its age, and the detection
 * and convergence latencies the pass completes. Called before the loop remembers `decision`.
 */
export function passJudged(decision: Decision, decidedAt: string, loop: LoopMemory): void {
  observationJudged(decision, decidedAt);
  for (const s of detectionLatencies(decision, loop.lastDecision)) {
    seconds(
      DETECTION_LATENCY_METRIC,
      'Seconds from a change on the node (its mtime or ctime) to the snapshot that first showed it, per drifted resource of a node last seen CONVERGED',
      s,
    );
  }
  const converged = convergenceLatency(decision, decidedAt, loop, workflowInfo().startTime.toISOString());
  if (converged) {
    seconds(
      CONVERGENCE_LATENCY_METRIC,
      'Seconds from the generation start, or the first snapshot showing drift since the last CONVERGED decision, to the decision recording CONVERGED',
      converged.seconds,
      { start: converged.start },
    );
  }
}

/**
 * How old the snapshot a pass judged was (decided_at - observed_at). Steady-state passes count
 * too, since a slowly ageing snapshot is exactly what this is for. No sample when nothing was
 * observed (unreachable).
 */
function observationJudged(decision: Decision, decidedAt: string): void {
  if (!decision.observed_at) return;
  seconds(
    OBSERVATION_AGE_METRIC,
    'Seconds between a snapshot being taken on the node (observed_at) and a pass deciding on it',
    msBetween(decision.observed_at, decidedAt) / 1000,
  );
}

/**
 * When the change a change marker records happened, in epoch ms, for the markers that carry a
 * time (their spelling is src/agent/markers.ts's): a regular file's mtime (files, flags) and a
 * symlink's ctime (a release's `current`). Null for the rest: absent, a service's pid and start
 * ticks (ticks since boot, not a time of day), something in the way.
 */
export function markerTimeMs(marker: string | null): number | null {
  const parts = marker?.split(':') ?? [];
  // file:<mtimeMs>:<ino>:<size>[:<ctimeMs>[:<digest>]], and link:<target>:<ctimeMs> (a target may hold colons).
  const at =
    parts[0] === 'file' && parts.length >= 4 && parts.length <= 6
      ? parts[1]
      : parts[0] === 'link' && parts.length >= 3
        ? parts.at(-1)
        : '';
  const ms = at ? Number(at) : NaN;
  return Number.isFinite(ms) && ms > 0 ? ms : null;
}

/**
 * Detection latencies a pass completes, in seconds: one per resource with drift to repair or
 * report (a planned action) when the loop last saw the node CONVERGED, from the change's time on
 * its marker to the snapshot that shows it (observed_at; both are the node's clock). A change is
 * only taken as such when it is newer than the previous snapshot, which showed the node at desired
 * (else the time is a preserved mtime, not the change's).
 */
export function detectionLatencies(decision: Decision, previous: Decision | null): number[] {
  if (previous?.convergence_status !== 'CONVERGED' || !decision.observed_at || !previous.observed_at) return [];
  const seenAt = Date.parse(decision.observed_at);
  const lastAtDesired = Date.parse(previousSnapshotAt(previous));
  const markers = new Map<string, string | null>();
  for (const a of decision.planned_actions) if (!markers.has(a.resource_key)) markers.set(a.resource_key, a.observed_marker);
  const out: number[] = [];
  for (const marker of markers.values()) {
    const changedAt = markerTimeMs(marker);
    // observed_at is whole milliseconds, an mtime is not: a change in the snapshot's own millisecond counts.
    if (changedAt !== null && changedAt > lastAtDesired && changedAt < seenAt + 1) out.push((seenAt - changedAt) / 1000);
  }
  return out;
}

/** The snapshot a decision last saw: the post-action probe's when it acted, else the one it was planned from. */
function previousSnapshotAt(decision: Decision): string {
  const probe = decision.post_action_observation as { observed_at?: unknown } | null;
  return typeof probe?.observed_at === 'string' ? probe.observed_at : decision.observed_at!;
}

/**
 * The convergence latency a CONVERGED decision completes, or null when it ends no episode (the
 * node was CONVERGED already and this pass repaired nothing) or the loop no longer holds where the
 * episode began. An episode starts
 *  - at the generation start (the workflow chain's start), while this generation has never
 *    recorded CONVERGED;
 *  - else at the first snapshot since the last CONVERGED decision that showed drift (a decision
 *    with planned actions, carried out or withheld), which may be this pass's own when it
 *    repaired what it found.
 * A stretch without drift (an unreachable node, a stale snapshot) that ends CONVERGED is no episode.
 */
export function convergenceLatency(
  decision: Decision,
  decidedAt: string,
  loop: LoopMemory,
  generationStart: string,
): { start: ConvergenceStart; seconds: number } | null {
  if (decision.convergence_status !== 'CONVERGED') return null;
  const own =
    decision.planned_actions.length > 0 && decision.observed_at ? { start: 'drift' as const, at: decision.observed_at } : null;
  const earlier = loop.lastDecision?.convergence_status === 'CONVERGED' ? 'none' : episodeStart(loop.ledger, generationStart);
  const begun = earlier === 'none' ? own : earlier;
  if (!begun) return null;
  return { start: begun.start, seconds: msBetween(begun.at, decidedAt) / 1000 };
}

/**
 * Where the episode the ledger's last entries belong to began, from the recorded entries alone:
 * 'none' when they show no drift since the last CONVERGED one, null when the entries kept no
 * longer reach back to its start.
 */
function episodeStart(
  ledger: readonly LedgerEntry[],
  generationStart: string,
): { start: ConvergenceStart; at: string } | 'none' | null {
  let lastConverged = ledger.length - 1;
  while (lastConverged >= 0 && ledger[lastConverged].convergence_status !== 'CONVERGED') lastConverged--;
  if (lastConverged < 0) {
    // Never CONVERGED in this generation, if the entries kept go back to its first one.
    return ledger.length === 0 || ledger[0].seq === 1 ? { start: 'generation', at: generationStart } : null;
  }
  const drift = ledger.slice(lastConverged + 1).find((e) => e.planned_actions.length > 0 && e.observed_at);
  return drift ? { start: 'drift', at: drift.observed_at! } : 'none';
}

/**
 * A decision was recorded (one ledger entry): counted by status and reason, and the node's open
 * conditions by type. Every type is set, zero when not open, so a condition that closed reads 0
 * (level, not event: a new generation's workflow also clears what its predecessor left open).
 */
export function decisionRecorded(decision: Decision): void {
  emit({
    kind: 'counter',
    name: DECISIONS_METRIC,
    unit: '1',
    help: 'Decisions recorded in the ledger, by convergence_status and reason',
    valueType: 'int',
    value: 1,
    labels: { status: decision.convergence_status, reason: decision.reason },
  });
  const open = new Map<ConditionType, number>(CONDITION_TYPES.map((t) => [t, 0]));
  for (const c of decision.conditions) open.set(c.type, (open.get(c.type) ?? 0) + 1);
  for (const [type, count] of open) {
    emit({
      kind: 'gauge',
      name: OPEN_CONDITIONS_METRIC,
      unit: '1',
      help: 'Open conditions of a node by type, as of its last recorded decision',
      valueType: 'int',
      value: count,
      labels: { type, node: decision.node_id },
    });
  }
}

/** A work item dropped a report its loop did not confirm. */
export function workReportDropped(condition: string): void {
  emit({
    kind: 'counter',
    name: WORK_REPORTS_DROPPED_METRIC,
    unit: '1',
    help: 'Reports a work item dropped because its loop (or the ledger store) did not confirm them',
    valueType: 'int',
    value: 1,
    labels: { condition },
  });
}

/** After each flush: how many entries this loop decided that the fleet-wide store has not taken (0 when it keeps up). */
export function ledgerBacklog(entries: number): void {
  emit({
    kind: 'gauge',
    name: LEDGER_BACKLOG_METRIC,
    unit: '1',
    help: 'Ledger entries a loop decided that the fleet-wide store has not taken yet',
    valueType: 'int',
    value: entries,
    labels: {},
  });
}
