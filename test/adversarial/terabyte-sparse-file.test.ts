import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { FAST_POLICY } from '../helpers/fleet';
import { statusesOf, useStack } from '../helpers/stack';
import { until } from '../helpers/until';

/*
 * A local writer puts a 1 TB sparse file at a managed path of one node (it takes no disk, and
 * reads as a terabyte of zeros). Every observe used to hash it in full, a timed-out attempt kept
 * its slot at the agent's gate, and within minutes the agent's other nodes got no observe at all.
 * Now the file is judged by its size from fstat, before a byte is read: an obstruction naming its
 * size, at once; and the sibling node served by the same agent keeps being repaired meanwhile.
 */

const stack = useStack();

async function fileNode(node: string, file: string, content: string, policy: Record<string, unknown> = {}) {
  const doc = {
    node,
    generation: 1,
    resources: { data: { type: 'file', path: file, content } },
    policy: { ...FAST_POLICY, conflict_window: '0s', writer_repairs: 0, ...policy },
  };
  await fs.writeFile(stack.fleet.desiredFile(node), stringify(doc));
  await stack.fleet.writeAgent(node, { mode: 'enforce' });
}

describe('a terabyte sparse file at a managed path', () => {
  it('is an obstruction named with its size, never hashed, while the sibling node keeps being repaired', async () => {
    const [big, sibling] = ['TB-1', 'TB-2'];
    await fileNode(big, 'data/blob.bin', 'small\n');
    await fileNode(sibling, 'etc/app.conf', 'workers = 8\n');
    const huge = path.join(stack.fleet.root(big), 'data', 'blob.bin');
    await fs.mkdir(path.dirname(huge), { recursive: true });
    await fs.writeFile(huge, '');
    await fs.truncate(huge, 2 ** 40);
    // One agent process serves both nodes (in this test process, sharing its one gate).
    await stack.startAgent(big);
    await stack.startAgent(sibling);
    const bigLoop = await stack.startNode(big, 1);
    const siblingLoop = await stack.startNode(sibling, 1);

    const blocked = await stack.waitFor(bigLoop, (s) => s.reason === 'DESTRUCTIVE_REPAIR_REQUIRED', 20_000);
    expect(JSON.stringify(blocked.conditions)).toContain('holds 1 TiB, more than the 16 MiB Datum reads or keeps a copy of');
    await stack.waitFor(siblingLoop, (s) => s.convergence_status === 'CONVERGED', 20_000);

    // The sibling is changed by hand again and again; each change is repaired within seconds. The
    // next change waits for the repair's proof in the ledger: one made between Datum's write and
    // its post-action observation would rightly be another writer (CONFLICT), not drift.
    const conf = path.join(stack.fleet.root(sibling), 'etc', 'app.conf');
    const repairs = async () =>
      statusesOf(await stack.ledger(siblingLoop)).filter((s) => s === 'CONVERGED/CONVERGED_AFTER_REPAIR').length;
    for (let i = 0; i < 5; i++) {
      const before = await repairs();
      await fs.writeFile(conf, `workers = ${i}\n`);
      await until(repairs, { what: `change ${i} of the sibling to be repaired`, accept: (n) => n > before, timeoutMs: 20_000 });
      expect(await fs.readFile(conf, 'utf8')).toBe('workers = 8\n');
    }
    expect(await repairs()).toBeGreaterThanOrEqual(5);
    // And the big file's node is still judged on fresh observations, each as quick as any other.
    const state = await stack.state(bigLoop);
    expect(Date.now() - Date.parse(state.last_verified_at ?? '1970-01-01')).toBeLessThan(30_000);
    expect((await fs.stat(huge)).size).toBe(2 ** 40);
    await bigLoop.terminate('test done');
    await siblingLoop.terminate('test done');
  });
});
