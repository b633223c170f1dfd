import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startAgentProcess, serving } from '../helpers/agent-process';
import { useChildren } from '../helpers/processes';
import { useStack } from '../helpers/stack';

/*
 * A local writer plants <root>/.datum/holder.json naming a live process (here this test's own,
 * with its real start time, as if a `datum agent reset-fence` were running). It used to keep the agent
 * from starting, for every node the process served. The root's kernel lock decides now, and the
 * planted record is simply replaced.
 */

const stack = useStack({ controller: false });
const children = useChildren();

async function startTicks(pid: number): Promise<string> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

describe('a forged holder.json', () => {
  it('keeps no agent from starting, on its node or any other the process serves', async () => {
    const [a, b] = ['FH-1', 'FH-2'];
    const configs = [await stack.fleet.writeAgent(a), await stack.fleet.writeAgent(b)];
    const forged = {
      kind: 'reset-fence',
      pid: process.pid,
      started: await startTicks(process.pid),
      node: a,
      since: new Date().toISOString(),
    };
    await fs.mkdir(path.join(stack.fleet.root(a), '.datum'), { recursive: true });
    await fs.writeFile(path.join(stack.fleet.root(a), '.datum', 'holder.json'), JSON.stringify(forged));

    const agent = startAgentProcess(configs, stack.env.address, children);
    await serving(agent);
    expect(agent.output()).toContain(`serving datum-node-${a}, datum-node-${b}`);
    const holder = JSON.parse(await fs.readFile(path.join(stack.fleet.root(a), '.datum', 'holder.json'), 'utf8')) as {
      pid: number;
    };
    expect(holder.pid).toBe(agent.child.pid);
    agent.child.kill('SIGTERM');
    expect(await agent.exited).toBe(0);
  });
});
