import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { resetNodeFence } from '../../src/agent/node/fence-reset';
import { startAgentProcess, serving } from '../helpers/agent-process';
import { useChildren } from '../helpers/processes';
import { useStack } from '../helpers/stack';

/*
 * A second agent started on a root another agent serves. Refused while the first lives, by the
 * root's kernel lock (no file decides it): it neither serves the node nor leaves anything that
 * lets `reset-fence` in under the first. Once the first is killed -9, the kernel has dropped its
 * lock, and the next agent starts at once.
 */

const stack = useStack({ controller: false });
const children = useChildren();

describe('a second agent on a live root', () => {
  it('is refused while the first lives, and starts once the first is killed -9', async () => {
    const node = 'SA-1';
    const first = await stack.fleet.writeAgent(node);
    // The same root under another agent.yaml in another directory: the same-directory check cannot see it.
    const elsewhere = path.join(stack.fleet.dir, 'other-host-config');
    await fs.mkdir(elsewhere);
    const second = path.join(elsewhere, `${node}.yaml`);
    await fs.writeFile(second, stringify({ node, root: stack.fleet.root(node), reconciliation: { mode: 'enforce' } }));

    const one = startAgentProcess([first], stack.env.address, children);
    await serving(one);
    const two = startAgentProcess([second], stack.env.address, children);
    expect(await two.exited).not.toBe(0);
    expect(two.output()).toMatch(
      new RegExp(
        `${second}: ${stack.fleet.root(node)} is held by an agent \\(pid ${one.child.pid}, node ${node}, since .*\\): one node root is served by one agent at a time — fix: stop the other agent`,
      ),
    );
    // The refused agent touched nothing the first relies on: reset-fence is still refused.
    const reset = await resetNodeFence({ configPath: first, node, to: 1, by: 'test', reason: 'probe' }).then(
      () => 'reset',
      (err: Error) => err.message,
    );
    expect(reset).toMatch(/held by an agent|no generation fence/);

    one.child.kill('SIGKILL');
    await one.exited;
    const three = startAgentProcess([second], stack.env.address, children);
    await serving(three);
    three.child.kill('SIGTERM');
    expect(await three.exited).toBe(0);
  });
});
