/*
 * Datum's own Prometheus metric names: dashboards and alerts rely on them, like the Temporal
 * contract. The workflow side emits through src/workflows/metrics.ts, the agent through
 * src/agent/metrics.ts; the controller worker serves them (src/worker/metrics.ts).
 *
 * Their labels join with the SDK's own `temporal_*` series: `namespace`, `task_queue` and
 * `workflow_type` (workflow metrics) or `activity_type` (the agent's), snake_case like core's. The
 * SDK's own meters would add camelCase `taskQueue`/`workflowType`/`activityType` to custom
 * metrics, so Datum's go around them: the workflow through METRICS_SINK, the agent through the
 * runtime's meter, each labelled from the workflow's or activity's info.
 */

export const DECISIONS_METRIC = 'datum_decisions_total';
export const OPEN_CONDITIONS_METRIC = 'datum_open_conditions';
export const OBSERVATION_AGE_METRIC = 'datum_observation_age_seconds';
export const ACTIONS_METRIC = 'datum_actions_total';
/** Agent: seconds an apply took, by action kind (a release install includes its artifact fetch). */
export const APPLY_DURATION_METRIC = 'datum_apply_duration_seconds';
/** Controller, from visibility: running reconcile loops by status, and nodes with each condition type open. */
export const FLEET_NODES_METRIC = 'datum_fleet_nodes';
export const FLEET_CONDITIONS_METRIC = 'datum_fleet_conditions';
/** Controller, from visibility: open work items by state (ESCALATED: unclaimed past the escalation time). */
export const WORK_ITEMS_METRIC = 'datum_work_items';
/**
 * Controller, from the authority and visibility: nodes with desired state and no running
 * reconcile loop, by `end`: how the node's last loop ended (never_started, terminated, failed,
 * timed_out, canceled, completed). Such a node is nobody's to repair until a loop runs again.
 */
export const FLEET_NODES_WITHOUT_LOOP_METRIC = 'datum_fleet_nodes_without_loop';
/**
 * Controller, from the fleet workflow's memo: when it last looked at the fleet (Unix seconds), and
 * how often it looks. A last look older than its interval and a grace is an unwatched fleet, as
 * `datum status` says it; the alert DatumFleetUnwatched fires on it.
 */
export const FLEET_LAST_LOOK_METRIC = 'datum_fleet_last_look_timestamp_seconds';
export const FLEET_LOOK_INTERVAL_METRIC = 'datum_fleet_look_interval_seconds';
/** Controller: reports a work item dropped because its loop did not confirm them (a forged or garbled report), by condition. */
export const WORK_REPORTS_DROPPED_METRIC = 'datum_work_reports_dropped_total';
/** Controller: ledger entries a loop decided that the fleet-wide store has not taken yet. */
export const LEDGER_BACKLOG_METRIC = 'datum_ledger_backlog';
/**
 * Controller: seconds from a change on the node to the snapshot that first showed it, one sample
 * per drifted resource when a pass finds drift on a node the loop last saw CONVERGED. The change's
 * time is read off the resource's change marker (a file's or flag's mtime, the release link's
 * ctime), so both ends are the node's clock; a change that leaves no time (a deleted file, a
 * stopped service) or one older than the last snapshot that showed the node at desired (an mtime
 * a writer preserved) gives no sample. The snapshot's age when judged is OBSERVATION_AGE_METRIC.
 */
export const DETECTION_LATENCY_METRIC = 'datum_detection_latency_seconds';
/**
 * Controller: seconds from the start of an episode to the decision that records CONVERGED, by
 * `start`: `generation` (the generation's loop started and had not converged yet) or `drift` (the
 * first snapshot since the last CONVERGED decision that showed drift to repair or report).
 */
export const CONVERGENCE_LATENCY_METRIC = 'datum_convergence_latency_seconds';
/** Where a convergence episode starts: the `start` label of CONVERGENCE_LATENCY_METRIC. */
export const CONVERGENCE_STARTS = ['generation', 'drift'] as const;
export type ConvergenceStart = (typeof CONVERGENCE_STARTS)[number];
/** Always 1, labelled with the version `datum --version` prints (src/cli/build-info.ts). */
export const BUILD_INFO_METRIC = 'datum_build_info';

/** Around the default observation_ttl (60s): a fresh snapshot is well under a second old. */
export const OBSERVATION_AGE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** From a flag write (milliseconds) to a release fetched over a slow link (minutes). */
export const APPLY_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** From a change the watch sees at once (well under a second) to one only a resync finds (minutes). */
export const DETECTION_LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

/** From an in-pass repair (a second) to a rollout's release fetch, or an operator's resolution (hours). */
export const CONVERGENCE_LATENCY_BUCKETS = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 10800, 43200];

/** The labels Datum adds to every workflow metric, and to every agent metric (like core's on `temporal_*`). */
export const WORKFLOW_METRIC_LABELS = ['namespace', 'task_queue', 'workflow_type'] as const;
export const ACTIVITY_METRIC_LABELS = ['namespace', 'task_queue', 'activity_type', 'workflow_type'] as const;

/**
 * The workflow sink Datum's workflow metrics leave the sandbox through: the controller worker
 * registers it (src/worker/workflow-metrics.ts) and labels each sample from the calling workflow's
 * info. The SDK's own sink for the workflow meter is reserved (`__temporal_` names cannot be
 * registered), and the worker's meter behind it adds camelCase tags.
 */
export const METRICS_SINK = 'datumMetrics';

/** One sample, as a workflow hands it to METRICS_SINK (plain data: it is copied out of the sandbox). */
export interface MetricSample {
  kind: 'counter' | 'gauge' | 'histogram';
  name: string;
  unit: string;
  help: string;
  /** Histograms and gauges: int or float; counters are int. */
  valueType: 'int' | 'float';
  value: number;
  labels: Record<string, string>;
}

/** The sink's shape (a type alias, as proxySinks<T extends Sinks> needs an index-compatible type). */
export type DatumMetricSinks = { [METRICS_SINK]: { emit(sample: MetricSample): void } };
/**
 * Controller: its loop cache (maxCachedWorkflows), by `of`: `size` (the loops it holds at most),
 * `cached` (the loops it holds) and `loops` (reconcile loops running on its task queue). More
 * loops than the size, with the cache full, means loops replayed on every pass (src/worker/loop-cache.ts).
 */
export const LOOP_CACHE_METRIC = 'datum_controller_loop_cache';
