import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startAgentProcess, serving } from '../helpers/agent-process';
import { useChildren } from '../helpers/processes';
import { useStack } from '../helpers/stack';

/*
 * A local writer swaps one of the agent's own records, a service's state file
 * (.datum/services/app.json, read on every observe and every watch poll), for a 300 MB sparse
 * file. It used to be read whole, every half second: 1.1 to 1.5 GB more in the agent's peak memory
 * within 12 s. Every record is capped from fstat now, before a byte is read: the agent's memory
 * does not move, and the loop is told that the record is not one Datum wrote.
 */

const stack = useStack();
const children = useChildren();

/** The peak resident memory of a process so far (VmHWM), in MiB. */
async function peakMiB(pid: number): Promise<number> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)![1]) / 1024;
}

describe('an oversized agent record', () => {
  it('is refused from its size without being read: the agent’s memory stays flat and the loop says why', async () => {
    const node = 'OR-1';
    await stack.fleet.writeDesired(node, 1);
    const agentYaml = await stack.fleet.writeAgent(node, { mode: 'enforce' });
    const agent = startAgentProcess([agentYaml], stack.env.address, children);
    await serving(agent);
    const loop = await stack.startNode(node, 1);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    await stack.waitForWatch(loop);
    const before = await peakMiB(agent.child.pid!);

    const record = path.join(stack.fleet.root(node), '.datum', 'services', 'app.json');
    const swapped = `${record}.swap`;
    await fs.writeFile(swapped, '');
    await fs.truncate(swapped, 300 * 2 ** 20);
    await fs.rename(swapped, record);

    const state = await stack.waitFor(loop, (s) => JSON.stringify(s.conditions).includes('holds 300 MiB'), 30_000);
    expect(JSON.stringify(state.conditions)).toMatch(
      /holds 300 MiB, more than the 64 KiB a service record holds, and was not read/,
    );
    // Twelve more seconds of observes and watch polls on it.
    await new Promise((r) => setTimeout(r, 12_000));
    const after = await peakMiB(agent.child.pid!);
    expect(after - before, `peak memory ${before.toFixed(0)} MiB → ${after.toFixed(0)} MiB`).toBeLessThan(64);
    await loop.terminate('test done');
  });
});
