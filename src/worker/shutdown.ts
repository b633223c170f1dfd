/*
 * How long a controller worker drains on SIGTERM before it is killed. The deployments give the
 * process SHUTDOWN_BUDGET_S between SIGTERM and SIGKILL (docker-compose.yml stop_grace_period,
 * deploy/systemd TimeoutStopSec; test/deploy checks both): in-flight activities get the grace
 * time to finish (a ledger append, a desired-state read), the SDK gives up at the force time,
 * and the rest is for closing the connections and the ledger store before the kill.
 */

/** Seconds between SIGTERM and SIGKILL that the deployment files give a Datum process. */
export const SHUTDOWN_BUDGET_S = 30;
/** In-flight activities may finish for this long; then they are cancelled. */
export const SHUTDOWN_GRACE_TIME_MS = 20_000;
/** Then the worker stops waiting for them, leaving time to close connections before SIGKILL. */
export const SHUTDOWN_FORCE_TIME_MS = 25_000;
