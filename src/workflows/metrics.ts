/*
 * The workflow side of emitting Datum's own Prometheus metrics (their names are the contract's,
 * src/contract/metrics.ts). Workflow-safe: the workflow
 * `metricMeter` forwards through a sink that is skipped during replay, so a metric is neither a
 * command nor recorded in history, and a replayed pass does not count twice.
 *
 * The controller worker serves these next to the SDK's own `temporal_*` metrics (see
 * src/worker/metrics.ts); the workflow meter adds the tags namespace, taskQueue and workflowType.
 */
import { metricMeter } from '@temporalio/workflow';
import { DECISIONS_METRIC, LEDGER_BACKLOG_METRIC, OBSERVATION_AGE_METRIC, OPEN_CONDITIONS_METRIC } from '../contract';
import { CONDITION_TYPES, msBetween, type ConditionType, type Decision } from '../domain';

/**
 * A pass judged a snapshot, whether or not the decision is recorded: how old the snapshot was
 * when judged (decided_at - observed_at). Steady-state passes count too, since a slowly ageing
 * snapshot is exactly what this is for. No sample when nothing was observed (unreachable).
 */
export function observationJudged(decision: Decision, decidedAt: string): void {
  if (!decision.observed_at) return;
  const seconds = msBetween(decision.observed_at, decidedAt) / 1000;
  // The agent's clock may run ahead of the workflow's; a histogram refuses negative values, and
  // a metric must never fail a workflow task.
  if (!Number.isFinite(seconds)) return;
  metricMeter
    .createHistogram(
      OBSERVATION_AGE_METRIC,
      'float',
      's',
      'Seconds between a snapshot being taken on the node (observed_at) and a pass deciding on it',
    )
    .record(Math.max(0, seconds));
}

/**
 * A decision was recorded (one ledger entry): counted by status and reason, and the node's open
 * conditions by type. Every type is set, zero when not open, so a condition that closed reads 0
 * (level, not event: a new generation's workflow also clears what its predecessor left open).
 */
export function decisionRecorded(decision: Decision): void {
  metricMeter
    .createCounter(DECISIONS_METRIC, '1', 'Decisions recorded in the ledger, by convergence_status and reason')
    .add(1, { status: decision.convergence_status, reason: decision.reason });
  const open = new Map<ConditionType, number>(CONDITION_TYPES.map((t) => [t, 0]));
  for (const c of decision.conditions) open.set(c.type, (open.get(c.type) ?? 0) + 1);
  const gauge = metricMeter.createGauge(
    OPEN_CONDITIONS_METRIC,
    'int',
    '1',
    'Open conditions of a node by type, as of its last recorded decision',
  );
  for (const [type, count] of open) gauge.set(count, { type, node: decision.node_id });
}

/** After each flush: how many entries this loop decided that the fleet-wide store has not taken (0 when it keeps up). */
export function ledgerBacklog(entries: number): void {
  metricMeter
    .createGauge(LEDGER_BACKLOG_METRIC, 'int', '1', 'Ledger entries a loop decided that the fleet-wide store has not taken yet')
    .set(entries);
}
