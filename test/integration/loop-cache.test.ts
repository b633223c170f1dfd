// Issue 33: a controller worker's loop cache (maxCachedWorkflows) was the SDK's, derived from the
// heap, and nothing said when the loops a worker ran outgrew it; every loop past it is replayed
// from its whole history on every pass. The size is now set (loop-cache.ts) and checked against
// the reconcile loops running on the worker's task queue, on a real server with real loops.

import { describe, expect, it } from 'vitest';
import { checkLoopCache, cacheSizeForHeap } from '../../src/worker/loop-cache';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';

const stack = useStack({ controller: false });

/** Four loops (no agent: each waits for its node, and stays running) on a queue of their own, served by a worker caching `size`. */
async function fourLoopsWithCache(size: number, prefix: string, cached: number) {
  const queue = `datum-control-${prefix.toLowerCase()}`;
  const worker = await stack.startController({ taskQueue: queue, maxCachedWorkflows: size, fleetInterval: false });
  for (const i of [1, 2, 3, 4]) {
    await stack.fleet.writeDesired(`${prefix}-${i}`, 1);
    await stack.startNode(`${prefix}-${i}`, 1, queue);
  }
  return until(() => checkLoopCache(stack.client, worker, queue, size), {
    what: `four loops running and ${cached} cached`,
    accept: (c) => c.loops === 4 && c.cached === cached,
  });
}

describe('the controller worker’s loop cache (issue 33)', () => {
  it('warns, with the fix, when more loops run on its queue than its full cache holds', async () => {
    const check = await fourLoopsWithCache(2, 'SMALL', 2);
    expect(check.warning).toMatch(
      /^4 loops run on datum-control-small and this worker's cache, full, holds 2: a loop evicted from it is replayed from its whole history when it wakes, on every pass — fix: raise --max-cached-workflows \(DATUM_MAX_CACHED_WORKFLOWS\) to 4 or more/,
    );
  });

  it('says nothing when the loops fit', async () => {
    expect((await fourLoopsWithCache(8, 'FITS', 4)).warning).toBeNull();
  });

  it('sizes a cache left unset by the heap: 0.5 MB a loop past 256 MB for the rest', () => {
    expect(cacheSizeForHeap(1024)).toBe(1536);
    expect(cacheSizeForHeap(2048)).toBe(3584);
    expect(cacheSizeForHeap(200)).toBe(2);
  });
});
