import { describe, expect, it } from 'vitest';
import { alteredAgent } from '../helpers/altered-agent';
import { useStack } from '../helpers/stack';

/*
 * Suspected in issue 18, confirmed: an agent whose clock runs ahead stamps its snapshots in the
 * future, and the controller counted a snapshot as fresh while its age (now − observed_at) was
 * negative: an hour ahead, a snapshot looked fresh for an hour past its observation_ttl, and the
 * ledger said CONVERGED with observation_fresh from it. The real agent's activities run here
 * behind a worker whose observations carry observed_at one hour ahead, as a node with a wrong
 * clock sends them; Datum must refuse to judge them (STALE_OBSERVATION, saying why) instead.
 */

const stack = useStack();

const HOUR = 60 * 60_000;

/** The real agent for `node`, with a clock an hour ahead in what it reports. */
function agentAnHourAhead(node: string): Promise<{ stop(): Promise<void> }> {
  const ahead = (iso: string | null) => (iso === null ? null : new Date(Date.parse(iso) + HOUR).toISOString());
  return alteredAgent(stack.env.nativeConnection, stack.fleet.agentFile(node), node, (real) => ({
    observe: async (request) => {
      const seen = await real.observe(request);
      return { ...seen, observed_at: ahead(seen.observed_at)!, heartbeat_at: ahead(seen.heartbeat_at) };
    },
  }));
}

describe('an agent whose clock runs an hour ahead', () => {
  it('has its snapshots refused as not fresh, never CONVERGED from them', async () => {
    const node = 'C-1';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node);
    const agent = await agentAnHourAhead(node);
    try {
      const handle = await stack.startNode(node, 1);
      const state = await stack.waitFor(handle, (s) => s.reason === 'STALE_OBSERVATION');
      expect(state.convergence_status).toBe('BLOCKED');
      expect(state.reason_detail).toMatch(/observed_at is 3600s ahead of the controller's clock/);
      await stack.waitForPasses(handle, 2);
      const ledger = await stack.ledger(handle);
      // Before the fix: CONVERGED_AFTER_REPAIR / ALREADY_CONVERGED, observation_fresh true.
      expect(ledger.filter((e) => e.convergence_status === 'CONVERGED')).toEqual([]);
      expect(ledger.filter((e) => e.observation_fresh)).toEqual([]);
      expect(ledger.flatMap((e) => e.authorized_actions)).toEqual([]);
      await handle.terminate('test done');
    } finally {
      await agent.stop();
    }
  });
});
