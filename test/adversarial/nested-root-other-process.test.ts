import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { FAST_POLICY } from '../helpers/fleet';
import { startAgentProcess, serving } from '../helpers/agent-process';
import { useChildren } from '../helpers/processes';
import { useStack } from '../helpers/stack';

/*
 * Node roots are disjoint host-wide, whichever process serves them. A node whose root lies inside
 * another node's root, with its agent.yaml elsewhere and served by another process, had its
 * operator-owned flag overwritten by the outer node's desired state while both loops said
 * CONVERGED. Now the second agent to start is refused, either way round; and a root moved inside
 * another after both started is recognised by identity at the write, which is refused.
 */

const stack = useStack();
const children = useChildren();

async function agentYaml(dir: string, node: string, root: string, extra: Record<string, unknown> = {}): Promise<string> {
  await fs.mkdir(dir, { recursive: true });
  const file = path.join(dir, `${node}.yaml`);
  await fs.writeFile(file, stringify({ node, root, reconciliation: { mode: 'enforce' }, ...extra }));
  return file;
}

describe('a nested root served by another process', () => {
  it('is refused at start, inner after outer and outer after inner', async () => {
    const outer = stack.fleet.root('NR-OUT');
    const inner = path.join(outer, 'srv', 'inner');
    const outerYaml = await agentYaml(path.join(stack.fleet.dir, 'host-a'), 'NR-OUT', outer);
    const innerYaml = await agentYaml(path.join(stack.fleet.dir, 'host-b'), 'NR-IN', inner);

    const a = startAgentProcess([outerYaml], stack.env.address, children);
    await serving(a);
    const b = startAgentProcess([innerYaml], stack.env.address, children);
    expect(await b.exited).not.toBe(0);
    expect(b.output()).toContain(
      `${innerYaml}: ${inner} lies inside ${outer}, the root of node NR-OUT (pid ${a.child.pid}, ${outerYaml})`,
    );
    a.child.kill('SIGKILL');
    await a.exited;

    const c = startAgentProcess([innerYaml], stack.env.address, children);
    await serving(c);
    const d = startAgentProcess([outerYaml], stack.env.address, children);
    expect(await d.exited).not.toBe(0);
    expect(d.output()).toContain(
      `${outerYaml}: ${outer} contains ${inner}, the root of node NR-IN (pid ${c.child.pid}, ${innerYaml})`,
    );
    c.child.kill('SIGTERM');
    await c.exited;
  });

  it("is never written through: a root moved inside another after both started keeps the outer node's desired state out", async () => {
    const outer = stack.fleet.root('NR-A');
    const innerAway = stack.fleet.root('NR-B');
    const aYaml = await agentYaml(path.join(stack.fleet.dir, 'host-c'), 'NR-A', outer);
    const bYaml = await agentYaml(path.join(stack.fleet.dir, 'host-d'), 'NR-B', innerAway, {
      overrides: { 'flag:maintenance': { approved_by: 'oncall', reason: 'disk swap', since: '2026-11-28T10:00:00Z' } },
    });
    const b = startAgentProcess([bYaml], stack.env.address, children);
    await serving(b);
    await fs.mkdir(path.join(innerAway, 'flags'), { recursive: true });
    await fs.writeFile(path.join(innerAway, 'flags', 'maintenance.json'), 'true\n');
    const a = startAgentProcess([aYaml], stack.env.address, children);
    await serving(a);
    // A local writer on the host moves NR-B's root into NR-A's, where NR-A's desired state writes.
    await fs.mkdir(path.join(outer, 'srv'), { recursive: true });
    await fs.rename(innerAway, path.join(outer, 'srv', 'b'));
    const doc = {
      node: 'NR-A',
      generation: 1,
      resources: { flip: { type: 'file', path: 'srv/b/flags/maintenance.json', content: 'false\n' } },
      policy: FAST_POLICY,
    };
    await fs.writeFile(stack.fleet.desiredFile('NR-A'), stringify(doc));
    const loop = await stack.startNode('NR-A', 1);
    const state = await stack.waitFor(loop, (s) => s.convergence_status !== null && s.convergence_status !== 'RETRY');
    expect(state.convergence_status).not.toBe('CONVERGED');
    expect(JSON.stringify(state.conditions)).toMatch(
      /is the root of node NR-B \(served by pid \d+\), and one node never reaches into another's/,
    );
    expect(await fs.readFile(path.join(outer, 'srv', 'b', 'flags', 'maintenance.json'), 'utf8')).toBe('true\n');
    await loop.terminate('test done');
    a.child.kill('SIGTERM');
    b.child.kill('SIGTERM');
    await Promise.all([a.exited, b.exited]);
  });
});
