import { describe, expect, it } from 'vitest';
import { useStack } from '../helpers/stack';

/*
 * Hole 8 of the safety model: a snapshot that is stale every time made the loop spin. With an
 * observation_ttl shorter than an observation takes, every snapshot arrives stale; the loop
 * re-took one about once a second, forever. Each stale re-take must now back off by
 * policy.backoff, and the condition must say how many were taken.
 */

const stack = useStack();

describe('a snapshot that is stale every time', () => {
  it('an observation_ttl shorter than any observation backs off instead of spinning, and says how many were taken', async () => {
    const node = 'S-1';
    // 1ms: no real observation is ever that young when the controller judges it.
    const policy = { observation_ttl: '1ms', resync_interval: '30s', backoff: { initial: '1s', factor: 2, max: '8s' } };
    await stack.fleet.writeDesired(node, 1, { policy });
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.reason === 'STALE_OBSERVATION');

    const windowMs = 16_000;
    const start = await stack.historyCounts(handle);
    await new Promise((r) => setTimeout(r, windowMs));
    const end = await stack.historyCounts(handle);

    // Backing off 1, 2, 4, 8 s fits at most 5 re-takes in 16 s; spinning at once a second would be 16.
    const observes = (end.scheduled.observe ?? 0) - (start.scheduled.observe ?? 0);
    expect(observes).toBeGreaterThanOrEqual(2);
    expect(observes).toBeLessThanOrEqual(6);
    expect(end.events - start.events).toBeLessThan(100);
    // Nothing was ever acted on from a stale snapshot.
    expect(end.scheduled.apply ?? 0).toBe(0);

    const state = await stack.state(handle);
    expect(state.convergence_status).toBe('BLOCKED');
    const stale = state.conditions.find((c) => c.type === 'STALE_OBSERVATION');
    expect(stale?.tried.join(' ')).toMatch(/^\d+ stale snapshot\(s\) in a row; the next is taken in \d+s$/);
    const taken = Number(/^(\d+)/.exec(stale!.tried[0] ?? '')?.[1]);
    expect(taken).toBeGreaterThanOrEqual(3);
    await handle.terminate('test done');
  });
});
