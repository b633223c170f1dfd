// Issue 18, hole 3: roots and configs could overlap. One node's root could contain another
// node's root, or the agent's own agent.yaml, and `root: /` (or any system directory) was
// accepted: desired state for one node could then write into another node, or rewrite the
// operator's trust settings. Roots are now judged by where they really are (symlinks resolved,
// device and inode), at the agent's start and on every re-read of agent.yaml, against the other
// agent.yaml files of the process and the sibling files of its directory (/etc/datum/agents/).

import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ObserveRequest } from '../../src/contract';
import { createAgentActivities } from '../../src/agent/activities';
import { runAgents } from '../../src/agent/worker';
import { expectRefusal, fileAction, runActivity } from '../agent/helpers';

const made: string[] = [];

afterEach(async () => {
  for (const dir of made.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-roots-')));
  made.push(dir);
  return dir;
}

async function agentYaml(file: string, node: string, root: string): Promise<string> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, JSON.stringify({ node, root, reconciliation: { mode: 'enforce' } }));
  return file;
}

const observe = (configPath: string, node: string) =>
  runActivity((r: ObserveRequest) => createAgentActivities(configPath).observe(r), {
    node,
    resources: { config: { type: 'file', path: 'etc/app.conf', content: 'x' } },
  });

const apply = (configPath: string, node: string, rel: string) =>
  runActivity(
    (r: Parameters<ReturnType<typeof createAgentActivities>['apply']>[0]) => createAgentActivities(configPath).apply(r),
    {
      node,
      action: { ...fileAction(node, 'config', rel, 'forged\n'), observed_marker: 'absent' },
    },
  );

describe('attack: a node root inside another node’s root (sibling agent.yaml files, as under systemd)', () => {
  it('both are refused with the fix, and nothing is written into the other node', async () => {
    const base = await tempDir();
    const outer = await agentYaml(path.join(base, 'agents/N-1.yaml'), 'N-1', path.join(base, 'nodes/N-1'));
    const inner = await agentYaml(path.join(base, 'agents/N-2.yaml'), 'N-2', path.join(base, 'nodes/N-1/etc'));
    const obs = await observe(inner, 'N-2');
    expect(obs.config_error).toMatch(
      /root: .*nodes\/N-1\/etc lies inside the root .*nodes\/N-1 of .*N-1\.yaml — fix: give every node a root of its own/,
    );
    expect((await observe(outer, 'N-1')).config_error).toMatch(/nodes\/N-1 contains the root .*nodes\/N-1\/etc of .*N-2\.yaml/);
    await expectRefusal(apply(inner, 'N-2', 'app.conf'), 'InvalidAgentConfig');
    await expect(fs.readFile(path.join(base, 'nodes/N-1/etc/app.conf'))).rejects.toThrow(/ENOENT/);
  });

  it('is found by where the root really is: a root spelled through a symlink into another root', async () => {
    const base = await tempDir();
    await fs.mkdir(path.join(base, 'nodes/N-1/data'), { recursive: true });
    await fs.symlink(path.join(base, 'nodes/N-1/data'), path.join(base, 'alias'));
    await agentYaml(path.join(base, 'agents/N-1.yaml'), 'N-1', path.join(base, 'nodes/N-1'));
    const inner = await agentYaml(path.join(base, 'agents/N-2.yaml'), 'N-2', path.join(base, 'alias'));
    expect((await observe(inner, 'N-2')).config_error).toMatch(/lies inside the root/);
  });

  it('an operator’s edit that moves a root into another is refused at the next re-read', async () => {
    const base = await tempDir();
    await agentYaml(path.join(base, 'agents/N-1.yaml'), 'N-1', path.join(base, 'nodes/N-1'));
    const second = await agentYaml(path.join(base, 'agents/N-2.yaml'), 'N-2', path.join(base, 'nodes/N-2'));
    expect((await observe(second, 'N-2')).config_error).toBeNull();
    await agentYaml(second, 'N-2', path.join(base, 'nodes/N-1/sub'));
    expect((await observe(second, 'N-2')).config_error).toMatch(/lies inside the root/);
  });
});

describe('attack: a root that holds an agent.yaml', () => {
  it('the agent’s own: refused, so desired state cannot rewrite the trust settings', async () => {
    const base = await tempDir();
    const own = await agentYaml(path.join(base, 'root/agent.yaml'), 'N-1', path.join(base, 'root'));
    expect((await observe(own, 'N-1')).config_error).toMatch(
      /contains this agent\.yaml .* — fix: keep agent\.yaml outside every node root/,
    );
    await expectRefusal(apply(own, 'N-1', 'agent.yaml'), 'InvalidAgentConfig');
    expect(JSON.parse(await fs.readFile(own, 'utf8'))).toMatchObject({ reconciliation: { mode: 'enforce' } });
  });

  it('another agent’s, in the same process: refused at the start of `datum agent`', async () => {
    const base = await tempDir();
    const a = await agentYaml(path.join(base, 'etc-a/N-1.yaml'), 'N-1', path.join(base, 'shared'));
    const b = await agentYaml(path.join(base, 'shared/conf/N-2.yaml'), 'N-2', path.join(base, 'n2'));
    await expect(runAgents({ configPaths: [b, a], address: '127.0.0.1:1' })).rejects.toThrow(
      /contains .*shared\/conf\/N-2\.yaml, another agent's agent\.yaml/,
    );
  });
});

describe('attack: a system directory as a root', () => {
  it.each(['/', '/etc', '/usr', '/var', '/tmp', os.homedir()])('root: %s is refused', async (root) => {
    const base = await tempDir();
    const file = await agentYaml(path.join(base, 'agents/N-1.yaml'), 'N-1', root);
    expect((await observe(file, 'N-1')).config_error).toMatch(
      /is the system directory .* — fix: give the node a directory of its own/,
    );
  });

  it('also when spelled through a symlink to it', async () => {
    const base = await tempDir();
    await fs.symlink('/etc', path.join(base, 'looks-harmless'));
    const file = await agentYaml(path.join(base, 'agents/N-1.yaml'), 'N-1', path.join(base, 'looks-harmless'));
    expect((await observe(file, 'N-1')).config_error).toMatch(/is the system directory \/etc/);
    await expectRefusal(apply(file, 'N-1', 'datum-was-here'), 'InvalidAgentConfig');
    await expect(fs.lstat('/etc/datum-was-here')).rejects.toThrow(/ENOENT/);
  });
});
