import type { Client } from '@temporalio/client';
import { Worker, bundleWorkflowCode, type NativeConnection, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createControlActivities } from '../activities';
import { codecDataConverter } from '../codec';
import type { LedgerStore } from '../activities/ledger-store';
import { CONTROL_TASK_QUEUE, loopShardQueue } from '../contract';
import { workflowBundleOptions, workflowInterceptorModules, workflowSource } from './bundle';
import { cacheSizeForHeap, watchLoopCache } from './loop-cache';
import { SHUTDOWN_FORCE_TIME_MS, SHUTDOWN_GRACE_TIME_MS } from './shutdown';
import { activeTracing, tracingWorkerOptions } from '../tracing';
import { workflowMetricSinks } from './workflow-metrics';
import { workflowPatchSinks } from './workflow-patches';

/**
 * How long a loop's next task waits for this worker on its sticky queue (where the loop is cached)
 * before the server hands it to datum-control, where any worker replays the whole history. The
 * SDK's 10 s is shorter than a busy worker takes to drain a pass over 1000 nodes on two cores,
 * and each task that waits it out costs a timed-out task, a task scheduled again and a full
 * replay (bench: 437 to 736 of 1000 loops per pass). A new task is not sent to a worker that has
 * stopped polling (the server sends to datum-control at once when no poller has been seen on the
 * sticky queue for 10 s); only the tasks already waiting when a worker dies wait this long for
 * another: a controller crash delays such a loop by up to 30 s, the default resync interval.
 */
const STICKY_QUEUE_WAIT = '30s';

export interface ControllerOptions {
  connection: NativeConnection;
  client: Client;
  namespace?: string;
  /** The fleet directory whose desired/ is the authority. */
  fleetDir: string;
  /** Where decisions are appended (openLedgerStore); the caller closes it after the worker stops. */
  ledger: LedgerStore;
  taskQueue?: string;
  /** How many shards the fleet's loops run in: the queue the rollout activities start a node's loop on (loopTaskQueue). */
  loopShards?: number;
  /** The queue whose shards those are (loopTaskQueue's base): the controller's own queue unless told. */
  loopQueueBase?: string;
  /** A prebuilt bundle (tests share one); otherwise DATUM_WORKFLOW_BUNDLE's file, or bundled at start. */
  workflowBundle?: WorkflowBundleWithSourceMap;
  /** How long a work item may stay unclaimed before it escalates (default DATUM_WORK_ESCALATE_AFTER, else 1h). */
  workEscalateAfter?: string;
  /** Loops kept in memory between passes (Worker maxCachedWorkflows); unset: as many as fit the heap (loop-cache.ts). */
  maxCachedWorkflows?: number;
  /** Where the check of the loops running against that cache warns (loop-cache.ts); unset: no check. */
  loopCacheLog?: { warn(message: string): void; info(message: string): void };
}

/**
 * The controller worker's tuning, apart from what it runs: its cache of loops, how long a loop's
 * next task waits for it on its sticky queue, and its shutdown times. The bench's shaped ceiling
 * (bench/ceiling-controller.js) runs its no-op loops with the same.
 */
export function controllerWorkerTuning(maxCachedWorkflows?: number) {
  return {
    maxCachedWorkflows: maxCachedWorkflows ?? cacheSizeForHeap(),
    stickyQueueScheduleToStartTimeout: STICKY_QUEUE_WAIT,
    // Within the stop timeout the deployments give (src/worker/shutdown.ts).
    shutdownGraceTime: SHUTDOWN_GRACE_TIME_MS,
    shutdownForceTime: SHUTDOWN_FORCE_TIME_MS,
  };
}

/** The controller worker: the reconcileNode, rollout and workItem workflows plus their activities, on datum-control. */
export async function createControllerWorker(options: ControllerOptions): Promise<Worker> {
  // OpenTelemetry when this process traces (src/tracing), in the activities and in the workflow
  // bundle (bundle.ts: without tracing, the sandbox loads none of it); the workflow span sink always.
  const tracing = tracingWorkerOptions();
  const variant = { tracing: activeTracing() !== undefined };
  const source = options.workflowBundle ? { workflowBundle: options.workflowBundle } : workflowSource(variant);
  const worker = await Worker.create({
    connection: options.connection,
    namespace: options.namespace ?? 'default',
    taskQueue: options.taskQueue ?? CONTROL_TASK_QUEUE,
    ...source,
    interceptors: {
      // Bundled at start only: a prebuilt bundle carries them already (bundle.ts), and the SDK
      // warns when they are given with one.
      ...('workflowsPath' in source ? { workflowModules: workflowInterceptorModules(variant) } : {}),
      activity: tracing.activityInterceptors,
    },
    // Datum's workflow metrics, labelled like core's (task_queue, workflow_type): workflow-metrics.ts;
    // the old branches replaying runs still take: workflow-patches.ts.
    sinks: { ...workflowMetricSinks(), ...workflowPatchSinks(), ...tracing.sinks },
    ...controllerWorkerTuning(options.maxCachedWorkflows),
    activities: createControlActivities({
      fleetDir: options.fleetDir,
      client: options.client,
      ledger: options.ledger,
      loopShards: options.loopShards ?? 1,
      loopQueueBase: options.loopQueueBase ?? options.taskQueue ?? CONTROL_TASK_QUEUE,
      ...(options.workEscalateAfter ? { workEscalateAfter: options.workEscalateAfter } : {}),
    }),
    // The payload codec, when configured (DATUM_CODEC_KEYS); it runs outside the workflow sandbox.
    dataConverter: codecDataConverter(),
  });
  if (options.loopCacheLog) watchLoopCache(options.client, worker, options.loopCacheLog);
  return worker;
}

/**
 * The controller's workers in one process: one on `taskQueue` (datum-control: rollouts, work items,
 * the fleet's view, and loops of a fleet with one shard) and one per loop shard it serves, each on
 * datum-control-loops-<shard> (loopTaskQueue). They share the connection and one bundle of the
 * workflows. A shard's worker caches its share of `maxCachedWorkflows` with a quarter's margin, as
 * FNV-1a spreads nodes near evenly but not exactly (docs/performance.md).
 */
export async function createControllerWorkers(options: ControllerOptions & { serveShards: number[] }): Promise<Worker[]> {
  const size = options.maxCachedWorkflows ?? cacheSizeForHeap();
  const variant = { tracing: activeTracing() !== undefined };
  // Bundled once for all of them, unless a prebuilt bundle is given or configured.
  const bundle =
    options.workflowBundle ??
    (options.serveShards.length > 0 && !('workflowBundle' in workflowSource(variant))
      ? await bundleWorkflowCode(workflowBundleOptions(variant))
      : undefined);
  const base = options.taskQueue ?? CONTROL_TASK_QUEUE;
  // Every worker of the process starts loops on the shards of the process's own queue.
  const shared = { ...options, loopQueueBase: base, ...(bundle ? { workflowBundle: bundle } : {}) };
  const share = Math.max(2, Math.ceil((1.25 * size) / Math.max(1, options.serveShards.length)));
  return Promise.all([
    createControllerWorker({ ...shared, maxCachedWorkflows: size }),
    ...options.serveShards.map((shard) =>
      createControllerWorker({ ...shared, taskQueue: loopShardQueue(shard, base), maxCachedWorkflows: share }),
    ),
  ]);
}
