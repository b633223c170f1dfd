import { describe, expect, it } from 'vitest';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { refreshDesiredSignal } from '../../src/contract';
import { auditLedger } from '../../src/domain/ledger-audit';
import { useStack } from '../helpers/stack';

/*
 * No note manufactures a status (issue 20): a refreshDesired that re-binds the loop's generation
 * to new content records a REBOUND note for a digest nothing has observed yet. The note must not
 * say CONVERGED for it: only the pass that follows, on a fresh observation, may. Real dev server,
 * controller, agent and service.
 */

const stack = useStack();

async function digestOf(node: string): Promise<string> {
  const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
  if (!read.ok) throw new Error(read.error);
  return read.intent.digest;
}

describe('a re-bind to new content', () => {
  it('records a REBOUND note that is not CONVERGED for the new digest; the next fresh pass is', async () => {
    const node = 'R-1';
    // A long resync: no pass of its own sees the new content before the refresh re-binds it.
    const policy = { resync_interval: '1h' };
    await stack.fleet.writeDesired(node, 1, { policy });
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const before = await digestOf(node);

    await stack.fleet.writeDesired(node, 1, { policy, workers: 9 });
    const after = await digestOf(node);
    expect(after).not.toBe(before);
    await handle.signal(refreshDesiredSignal, { generation: 1, digest: after });
    await stack.waitFor(handle, (_s, ledger) =>
      ledger.some((e) => e.desired_digest === after && e.observation_fresh && e.convergence_status === 'CONVERGED'),
    );

    const ledger = await stack.ledger(handle);
    const rebound = ledger.find((e) => e.reason === 'REBOUND')!;
    expect(rebound).toMatchObject({ desired_digest: after, observation_fresh: false });
    expect(rebound.convergence_status).not.toBe('CONVERGED');
    // The first entry after it that judged the new content is a fresh observation, which repaired.
    const judged = ledger.filter((e) => e.seq > rebound.seq && e.observation_fresh);
    expect(judged[0]).toMatchObject({ desired_digest: after, reason: 'CONVERGED_AFTER_REPAIR', convergence_status: 'CONVERGED' });
    expect(auditLedger(ledger.map((entry) => ({ chain_id: handle.workflowId, entry })))).toEqual([]);
    await handle.terminate('test done');
  });
});
