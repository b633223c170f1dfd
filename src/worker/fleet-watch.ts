import type { Client } from '@temporalio/client';
import { CONTROL_TASK_QUEUE, FLEET_INTERVAL_DEFAULT, FLEET_WORKFLOW_ID, WORKFLOW_TYPES, type FleetWorkflow } from '../contract';
import { durationMs } from '../domain';

/*
 * Every controller worker on datum-control keeps the fleet workflow running (src/workflows/fleet.ts):
 * it starts it, or attaches to the one that runs, when it starts and again every interval, so a
 * fleet workflow someone terminated is back within one interval of a worker noticing. A start that
 * finds one running is a single RPC and writes no history.
 */

export interface FleetWatch {
  /** Resolves once the first start (or attach) answered. */
  started: Promise<void>;
  stop(): void;
}

export function keepFleetWatched(
  client: Client,
  options: { interval?: string; taskQueue?: string; log?: (message: string) => void } = {},
): FleetWatch {
  const interval = options.interval ?? FLEET_INTERVAL_DEFAULT;
  const taskQueue = options.taskQueue ?? CONTROL_TASK_QUEUE;
  const ensure = async () => {
    try {
      await client.workflow.start<FleetWorkflow>(WORKFLOW_TYPES.fleet, {
        workflowId: FLEET_WORKFLOW_ID,
        taskQueue,
        args: [{ interval }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        staticSummary: 'the fleet view: nodes without a loop, silent loops, loops without desired state',
        staticDetails: '`datum status` reads it (query `view`); docs/architecture.md §3 "The fleet workflow".',
      });
    } catch (error) {
      // Temporal away for a moment: the next interval tries again, and `datum status` says unwatched meanwhile.
      options.log?.(`the fleet workflow could not be started: ${(error as Error).message}`);
    }
  };
  const started = ensure();
  const timer = setInterval(() => void ensure(), Math.max(durationMs(interval), 5000));
  timer.unref();
  return { started, stop: () => clearInterval(timer) };
}
