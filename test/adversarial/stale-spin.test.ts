import { describe, expect, it } from 'vitest';
import { useStack } from '../helpers/stack';
import type { WorkflowHandle } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';

/*
 * Hole 8 of the safety model: a snapshot that is stale every time made the loop spin. With an
 * observation_ttl shorter than an observation takes, every snapshot arrives stale; the loop
 * re-took one about once a second, forever. Each stale re-take must now back off by
 * policy.backoff, and the condition must say how many were taken.
 */

const stack = useStack();

/**
 * The wait the loop started after each observe, from the run's history: the longest timer begun
 * between one observe's completion and the next observe (ms).
 */
async function waitsAfterObserves(handle: WorkflowHandle): Promise<number[]> {
  const waits: number[] = [];
  let current: number | null = null;
  for (const e of (await handle.fetchHistory()).events ?? []) {
    if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'observe') {
      if (current !== null) waits.push(current);
      current = 0;
    }
    const timer = e.timerStartedEventAttributes?.startToFireTimeout;
    if (timer && current !== null) current = Math.max(current, tsToMs(timer));
  }
  return waits;
}
const RETAKES = 5;

describe('a snapshot that is stale every time', () => {
  it(
    'an observation_ttl shorter than any observation backs off instead of spinning, and says how many were taken',
    { timeout: 240_000 },
    async () => {
      const node = 'S-1';
      // 1ms: no real observation is ever that young when the controller judges it.
      const policy = { observation_ttl: '1ms', resync_interval: '30s', backoff: { initial: '1s', factor: 2, max: '8s' } };
      await stack.fleet.writeDesired(node, 1, { policy });
      await stack.fleet.writeAgent(node);
      await stack.startAgent(node);
      const handle = await stack.startNode(node, 1);
      // Counted in the run's history, not in a window of wall-clock time: a loaded machine takes
      // longer over each pass, so a window could hold few re-takes with or without the back-off.
      // One more pass than re-takes: each wait is read from one observe to the next.
      await stack.waitForPasses(handle, RETAKES + 1, 120_000);
      const waits = await waitsAfterObserves(handle);
      // Each stale snapshot's wait grows by policy.backoff: 1, 2, 4, 8 s, then 8 s (its max); a
      // timer starts a little short of its step when the workflow clock moved on within the pass
      // (931 ms for the first here), never by half of it. Spinning, every wait was the same second.
      const seen = `waits after each observe (ms): ${waits.join(', ')}`;
      [1_000, 2_000, 4_000, 8_000, 8_000].forEach((step, i) => {
        expect(waits[i], seen).toBeLessThanOrEqual(step);
        expect(waits[i], seen).toBeGreaterThan(i === 0 ? 0 : step / 2);
      });

      // Nothing was ever acted on from a stale snapshot.
      expect((await stack.historyCounts(handle)).scheduled.apply ?? 0).toBe(0);

      const state = await stack.state(handle);
      expect(state.convergence_status).toBe('BLOCKED');
      const condition = state.conditions.find((c) => c.type === 'STALE_OBSERVATION');
      expect(condition?.tried.join(' ')).toMatch(/^\d+ stale snapshot\(s\) in a row; the next is taken in \d+s$/);
      const taken = Number(/^(\d+)/.exec(condition!.tried[0] ?? '')?.[1]);
      expect(taken).toBeGreaterThanOrEqual(RETAKES);
      await handle.terminate('test done');
    },
  );
});
