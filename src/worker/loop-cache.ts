import v8 from 'node:v8';
import type { Client } from '@temporalio/client';
import { Runtime, type Worker } from '@temporalio/worker';
import { LOOP_CACHE_METRIC, WORKFLOW_TYPES, withFix } from '../contract';

/*
 * A controller worker keeps the loops it runs in memory between passes (the SDK's workflow cache,
 * maxCachedWorkflows). A loop evicted from a full cache is replayed from its whole history the
 * next time it wakes, so a worker whose cache holds fewer loops than it runs replays some of them
 * on every pass, and the cost of a pass grows with the fleet. The size is Datum's to state, not
 * the SDK's to derive from the heap: it is set (--max-cached-workflows, DATUM_MAX_CACHED_WORKFLOWS,
 * or the rule below), printed at start, published as a gauge, and checked against the loops
 * running on the worker's task queue.
 */

/** What a cached loop costs in the heap, with a margin over the 0.25–0.3 MB measured (docs/performance.md). */
export const LOOP_HEAP_MIB = 0.5;
/** The heap kept for everything but the cache: activities, the connection, the ledger's buffers. */
const HEAP_OUTSIDE_CACHE_MIB = 256;

/** The cache size for a worker with no size set: as many loops as fit its V8 heap limit. */
export function cacheSizeForHeap(heapLimitMiB = v8.getHeapStatistics().heap_size_limit / 2 ** 20): number {
  return Math.max(2, Math.floor((heapLimitMiB - HEAP_OUTSIDE_CACHE_MIB) / LOOP_HEAP_MIB));
}

export interface LoopCacheCheck {
  /** The loops the worker caches at most. */
  size: number;
  /** The loops it holds now. */
  cached: number;
  /** reconcileNode loops running on its task queue. */
  loops: number;
  /** Why and how to fix it, when the loops do not fit: the cache is full and more loops run. */
  warning: string | null;
}

/** The loops running on `taskQueue` against `worker`'s cache of `size`. */
export async function checkLoopCache(client: Client, worker: Worker, taskQueue: string, size: number): Promise<LoopCacheCheck> {
  const query = `WorkflowType = "${WORKFLOW_TYPES.reconcileNode}" AND ExecutionStatus = "Running" AND TaskQueue = "${taskQueue}"`;
  const { count: loops } = await client.workflow.count(query);
  const cached = worker.getStatus().numCachedWorkflows;
  // Full is what proves evictions: with several workers on the queue, each caches its share.
  const warning =
    loops > size && cached >= size
      ? withFix(
          `${loops} loops run on ${taskQueue} and this worker's cache, full, holds ${size}: a loop evicted from it is replayed from its whole history when it wakes, on every pass`,
          `raise --max-cached-workflows (DATUM_MAX_CACHED_WORKFLOWS) to ${loops} or more, with the heap for it (about ${LOOP_HEAP_MIB} MB a loop: --max-old-space-size, docs/performance.md), or run more controller workers on ${taskQueue}`,
        )
      : null;
  return { size, cached, loops, warning };
}

/**
 * Checks `worker`'s cache every `everyMs` while it runs: the gauge (size, cached, loops) always, a
 * warning when the loops stop fitting, and a line when they fit again. A failed count is left to
 * the next check.
 */
export function watchLoopCache(
  client: Client,
  worker: Worker,
  log: { warn(message: string): void; info(message: string): void },
  everyMs = 60_000,
): void {
  const { taskQueue, maxCachedWorkflows: size } = worker.options;
  const gauge = Runtime.instance().metricMeter.createGauge(
    LOOP_CACHE_METRIC,
    'int',
    '1',
    "A controller worker's loop cache: its size, the loops cached, and the loops running on its task queue",
  );
  let warned = false;
  const tick = async () => {
    if (worker.getState() === 'STOPPED' || worker.getState() === 'FAILED') return clearInterval(timer);
    const check = await checkLoopCache(client, worker, taskQueue, size).catch(() => null);
    if (check === null) return;
    for (const of of ['size', 'cached', 'loops'] as const) gauge.set(check[of], { of, task_queue: taskQueue });
    if (check.warning !== null && !warned) log.warn(check.warning);
    if (check.warning === null && warned)
      log.info(`the loops running on ${taskQueue} (${check.loops}) fit this worker's cache of ${size} again`);
    warned = check.warning !== null;
  };
  const timer = setInterval(() => void tick(), everyMs);
  timer.unref();
  // The first look soon after the worker starts: the gauge is there from the start, not a minute in.
  setTimeout(() => void tick(), 2000).unref();
}
