// Issue 33: an agent serving many nodes read and parsed every agent.yaml on every activity, and
// compared each node's root with every other root the process served (O(nodes)) at least every
// five seconds. agent.yaml is now parsed again only when its stamp changes, and a root's verdict
// stands while where the file and the root really are, and what the siblings claim, stay the
// same. These tests show that the work is counted once per change, and that every change an
// operator or a local writer can make is still caught.

import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ObserveRequest } from '../../src/contract';
import { createAgentActivities } from '../../src/agent/activities';
import { agentConfigParses, loadAgentConfig } from '../../src/agent/config';
import { rootCheckCounts } from '../../src/agent/fs';
import { runActivity } from './helpers';

const made: string[] = [];

afterEach(async () => {
  for (const dir of made.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-config-cache-')));
  made.push(dir);
  return dir;
}

async function agentYaml(file: string, node: string, root: string, mode = 'enforce'): Promise<string> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.mkdir(root, { recursive: true });
  await fs.writeFile(file, JSON.stringify({ node, root, reconciliation: { mode } }));
  return file;
}

/** Waits until the file's last change is older than the stamp's settling time (2 s), as an operator's file is. */
async function settled(file: string): Promise<void> {
  const { ctimeMs } = await fs.stat(file);
  const left = ctimeMs + 2_100 - Date.now();
  if (left > 0) await new Promise((r) => setTimeout(r, left));
}

const observe = (configPath: string, node: string) =>
  runActivity((r: ObserveRequest) => createAgentActivities(configPath).observe(r), {
    node,
    resources: { config: { type: 'file', path: 'etc/app.conf', content: 'x' } },
  });

describe('an agent serving many nodes (issue 33)', () => {
  it('does not compare every root with every other on every activity: N observes of M nodes judge no root again', async () => {
    const base = await tempDir();
    const nodes = Array.from({ length: 20 }, (_, i) => `N-${i + 1}`);
    const files = await Promise.all(
      nodes.map((n) => agentYaml(path.join(base, 'agents', `${n}.yaml`), n, path.join(base, 'nodes', n))),
    );
    // As `datum agent` starts: every agent.yaml read once.
    for (const file of files) await loadAgentConfig(file);
    const before = rootCheckCounts();
    const rounds = 2;
    for (let round = 0; round < rounds; round++)
      for (const [i, file] of files.entries()) expect((await observe(file, nodes[i])).config_error).toBeNull();
    const after = rootCheckCounts();
    // Without the cache every observe is a judgement against the 19 others: 40 and 760.
    expect(after.judged - before.judged).toBe(0);
    expect(after.compared - before.compared).toBe(0);
  });

  it('parses a settled agent.yaml once, and again after an operator’s edit in place of the same size', async () => {
    const base = await tempDir();
    const file = await agentYaml(path.join(base, 'agents/N-1.yaml'), 'N-1', path.join(base, 'nodes/N-1'));
    await settled(file);
    const first = agentConfigParses();
    expect((await loadAgentConfig(file)).reconciliation.mode).toBe('enforce');
    expect((await loadAgentConfig(file)).reconciliation.mode).toBe('enforce');
    expect(agentConfigParses() - first).toBe(1);
    const { ino, size } = await fs.stat(file);
    // The same inode and size: only its times say that it changed.
    await fs.writeFile(
      file,
      JSON.stringify({ node: 'N-1', root: path.join(base, 'nodes/N-1'), reconciliation: { mode: 'observe' } }),
    );
    expect(await fs.stat(file)).toMatchObject({ ino, size });
    expect((await loadAgentConfig(file)).reconciliation.mode).toBe('observe');
    expect(agentConfigParses() - first).toBe(2);
  });

  it('reads an agent.yaml changed within the last two seconds every time: a second edit in the same tick keeps its stamp', async () => {
    const base = await tempDir();
    const file = await agentYaml(path.join(base, 'agents/N-1.yaml'), 'N-1', path.join(base, 'nodes/N-1'));
    const first = agentConfigParses();
    await loadAgentConfig(file);
    await loadAgentConfig(file);
    expect(agentConfigParses() - first).toBe(2);
  });

  it('catches a root swapped under the agent for a symlink into another node’s root, with agent.yaml untouched', async () => {
    const base = await tempDir();
    const a = await agentYaml(path.join(base, 'agents/N-1.yaml'), 'N-1', path.join(base, 'nodes/N-1'));
    const b = await agentYaml(path.join(base, 'agents/N-2.yaml'), 'N-2', path.join(base, 'nodes/N-2'));
    await settled(b);
    expect((await observe(a, 'N-1')).config_error).toBeNull();
    expect((await observe(b, 'N-2')).config_error).toBeNull();
    await fs.mkdir(path.join(base, 'nodes/N-1/srv'));
    await fs.rename(path.join(base, 'nodes/N-2'), path.join(base, 'away'));
    await fs.symlink(path.join(base, 'nodes/N-1/srv'), path.join(base, 'nodes/N-2'));
    expect((await observe(b, 'N-2')).config_error).toMatch(
      /root: .*nodes\/N-2 lies inside the root .*nodes\/N-1 of .*N-1\.yaml — fix: give every node a root of its own/,
    );
  });

  it('catches a root replaced by a symlink to a system directory, with agent.yaml untouched', async () => {
    const base = await tempDir();
    const file = await agentYaml(path.join(base, 'agents/N-1.yaml'), 'N-1', path.join(base, 'nodes/N-1'));
    await settled(file);
    expect((await observe(file, 'N-1')).config_error).toBeNull();
    await fs.rm(path.join(base, 'nodes/N-1'), { recursive: true });
    await fs.symlink('/etc', path.join(base, 'nodes/N-1'));
    expect((await observe(file, 'N-1')).config_error).toMatch(/is the system directory \/etc/);
  });

  it('refuses a node whose agent.yaml lies inside a root this process already serves, and keeps serving that root', async () => {
    const base = await tempDir();
    const outer = await agentYaml(path.join(base, 'etc-a/N-1.yaml'), 'N-1', path.join(base, 'shared'));
    expect((await observe(outer, 'N-1')).config_error).toBeNull();
    const inner = await agentYaml(path.join(base, 'shared/conf/N-2.yaml'), 'N-2', path.join(base, 'n2'));
    expect((await observe(inner, 'N-2')).config_error).toMatch(
      /this agent\.yaml \(.*shared\/conf\/N-2\.yaml\) lies inside the root .*shared of .*N-1\.yaml, whose desired state could then rewrite it — fix: keep every agent\.yaml outside every node root/,
    );
    expect((await observe(outer, 'N-1')).config_error).toBeNull();
  });
});
