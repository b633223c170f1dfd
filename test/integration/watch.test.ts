import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileBytes } from '../../src/domain';
import { Stack } from '../helpers/stack';

/*
 * Event-driven observation: with resync at ten minutes, an out-of-band change is still seen in
 * about a second, because the agent's watch returns and the loop takes a fresh observation.
 * With watch off, only the resync would see it.
 */

let stack: Stack;
beforeAll(async () => {
  stack = await Stack.start();
  await stack.startController();
});
afterAll(async () => {
  await stack?.stop();
});

async function convergedNode(node: string, watch: boolean) {
  // conflict_window 0s: the change below is ordinary drift, not another writer flipping a repair.
  await stack.fleet.writeDesired(node, 1, { policy: { resync_interval: '10m', conflict_window: '0s', watch } });
  await stack.fleet.writeAgent(node);
  await stack.startAgent(node);
  const handle = await stack.startNode(node, 1);
  await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
  await new Promise((r) => setTimeout(r, 500)); // the watch is up
  return handle;
}

describe('event-driven observation', () => {
  it('an out-of-band change to a managed file is repaired within seconds, not at the next resync', async () => {
    const node = 'E-1';
    const handle = await convergedNode(node, true);
    const file = path.join(stack.fleet.root(node), 'etc/app/config.json');
    const changedAt = Date.now();
    await fs.writeFile(file, fileBytes({ workers: 99 }));
    const repairOf = (e: { decided_at: string; execution_evidence: Array<{ resource_key: string }> }) =>
      Date.parse(e.decided_at) > changedAt && e.execution_evidence.some((x) => x.resource_key === 'config');
    await stack.waitFor(handle, (_s, ledger) => ledger.some(repairOf), 10_000);
    const repair = (await stack.ledger(handle)).find(repairOf)!;
    expect(Date.parse(repair.observed_at!) - changedAt).toBeLessThan(5000);
    expect(repair.convergence_status).toBe('CONVERGED');
    expect(await fs.readFile(file, 'utf8')).toBe(fileBytes({ workers: 8 }));
    await handle.terminate('test done');
  });

  it('with watch off, the same change waits for the resync', async () => {
    const node = 'E-2';
    const handle = await convergedNode(node, false);
    const file = path.join(stack.fleet.root(node), 'etc/app/config.json');
    await fs.writeFile(file, fileBytes({ workers: 99 }));
    await new Promise((r) => setTimeout(r, 4000));
    const ledger = await stack.ledger(handle);
    expect(ledger.filter((e) => e.execution_evidence.length > 0)).toHaveLength(1); // only the first convergence
    expect(await fs.readFile(file, 'utf8')).toBe(fileBytes({ workers: 99 }));
    await handle.terminate('test done');
  });

  it('a watching node whose agent stops is reported unreachable, without a storm of retries', async () => {
    const node = 'E-3';
    await stack.fleet.writeDesired(node, 1, { policy: { resync_interval: '2s', node_timeout: '2s', watch: true } });
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    await stack.stopAgent(node);
    await stack.waitFor(handle, (s) => s.reason === 'NODE_UNREACHABLE', 30_000);
    const events = (await handle.describe()).historyLength;
    await new Promise((r) => setTimeout(r, 6000));
    // A few resync passes in six seconds, not a loop of failing watches.
    expect((await handle.describe()).historyLength - events).toBeLessThan(80);
    await handle.terminate('test done');
  });
});
