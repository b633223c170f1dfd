/*
 * Datum's own Prometheus metric names: dashboards and alerts rely on them, like the Temporal
 * contract. The workflow side emits through src/workflows/metrics.ts, the agent through
 * src/agent/metrics.ts; the controller worker serves them (src/worker/metrics.ts).
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
/** Controller: ledger entries a loop decided that the fleet-wide store has not taken yet. */
export const LEDGER_BACKLOG_METRIC = 'datum_ledger_backlog';
/** Always 1, labelled with the version `datum --version` prints (src/cli/build-info.ts). */
export const BUILD_INFO_METRIC = 'datum_build_info';

/** Around the default observation_ttl (60s): a fresh snapshot is well under a second old. */
export const OBSERVATION_AGE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** From a flag write (milliseconds) to a release fetched over a slow link (minutes). */
export const APPLY_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
