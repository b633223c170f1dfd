import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { FAST_POLICY } from '../helpers/fleet';
import { runDatum } from '../helpers/cli';
import { useStack } from '../helpers/stack';

/*
 * `datum import NODE`: desired state for a node as it is, read by its own agent through the
 * importNode workflow on a real stack (dev server, controller worker, agent on a temp root), as a
 * person runs the command. What it prints validates, and a rollout of it converges with no action.
 */

const stack = useStack();

/** How the test's files are on disk: written by this root process with the usual umask. */
const ROOT_0644 = { mode: '0644', owner: 'root', group: 'root' };

const datum = (...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: undefined });

/** A node holding a file and a flag Datum manages, converged at generation 1. */
async function managedNode(node: string): Promise<void> {
  const doc = {
    node,
    generation: 1,
    resources: {
      config: { type: 'file', path: 'etc/app/config.json', content: { workers: 8 } },
      maintenance: { type: 'flag', value: false },
    },
    policy: FAST_POLICY,
  };
  await fs.writeFile(stack.fleet.desiredFile(node), stringify(doc));
  await stack.fleet.writeAgent(node, { mode: 'enforce' });
  await stack.startAgent(node);
  const handle = await stack.startNode(node, 1);
  await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
}

describe('datum import', () => {
  it('prints desired state for the node as it is, which validates and rolls out with no action', async () => {
    const node = 'IMP-1';
    await managedNode(node);
    // What the host holds beyond desired state: a file written by hand, and a flag an operator set.
    const root = stack.fleet.root(node);
    await fs.mkdir(path.join(root, 'etc/motd.d'), { recursive: true });
    await fs.writeFile(path.join(root, 'etc/motd.d/10-welcome'), 'Welcome to IMP-1\n  (managed by hand until now)\n');
    await fs.writeFile(path.join(root, 'flags/canary.json'), '{"percent": 5}\n');

    const imported = await datum(
      'import',
      node,
      'welcome=file:etc/motd.d/10-welcome',
      '--fleet',
      stack.fleet.dir,
      '--generation',
      '2',
    );
    expect(imported.stderr).toBe('');
    expect(imported.code).toBe(0);
    expect(imported.stdout).toMatch(/^# desired\/nodes\/IMP-1\.yaml as node IMP-1 is, read by its agent at /);
    const doc = parse(imported.stdout) as { node: string; generation: number; resources: Record<string, unknown> };
    // The node's policy as its desired state set it (--fleet), defaults spelled out.
    expect(doc).toEqual({
      node,
      generation: 2,
      policy: expect.objectContaining({ resync_interval: FAST_POLICY.resync_interval, observation_ttl: '60s' }) as unknown,
      resources: {
        canary: { type: 'flag', value: { percent: 5 } },
        config: { type: 'file', path: 'etc/app/config.json', content: '{\n  "workers": 8\n}\n', ...ROOT_0644 },
        maintenance: { type: 'flag', value: false },
        welcome: {
          type: 'file',
          path: 'etc/motd.d/10-welcome',
          content: 'Welcome to IMP-1\n  (managed by hand until now)\n',
          ...ROOT_0644,
        },
      },
    });

    // It is desired state as the controller reads it: datum validate accepts the printed file as it is.
    await fs.writeFile(stack.fleet.desiredFile(node), imported.stdout);
    const valid = await datum('validate', stack.fleet.desiredFile(node));
    expect(valid.stdout + valid.stderr).toMatch(/valid/);
    expect(valid.code).toBe(0);

    // And a rollout of it finds nothing to do: the first pass is ALREADY_CONVERGED, with no action.
    const rollout = await datum('rollout', 'start', '--generation', '2', '--nodes', node, '--fleet', stack.fleet.dir, '--wait');
    expect(rollout.code).toBe(0);
    const gen2 = stack.client.workflow.getHandle(`datum/${node}/gen-2`);
    const state = await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    expect(state.reason).toBe('ALREADY_CONVERGED');
    const ledger = await stack.ledger(gen2);
    expect(ledger.flatMap((e) => e.authorized_actions)).toEqual([]);
    expect(ledger.flatMap((e) => e.resources.filter((r) => r.drift).map((r) => r.resource_key))).toEqual([]);
  });

  it('names what it cannot declare, and says so in its exit code', async () => {
    const node = 'IMP-2';
    await managedNode(node);
    const root = stack.fleet.root(node);
    await fs.writeFile(path.join(root, 'blob.bin'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x00, 0x01]));
    const r = await datum(
      'import',
      node,
      'blob=file:blob.bin',
      'gone=file:etc/nothing-here',
      'rel=release:current',
      'out=file:../x',
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /# not imported: blob: "blob\.bin" is binary \(not UTF-8 text, or it holds NUL bytes\).* — fix: ship it in a release artifact/,
    );
    expect(r.stdout).toMatch(/# not imported: gone: nothing is at "etc\/nothing-here"/);
    expect(r.stdout).toMatch(/# not imported: rel: a release cannot be imported/);
    expect(r.stdout).toMatch(/# not imported: out: .*\.\./);
    // What it could declare is still there, and valid.
    const doc = parse(r.stdout) as { resources: Record<string, unknown> };
    expect(Object.keys(doc.resources).sort()).toEqual(['maintenance']);
    const json = await datum('import', node, 'gone=file:etc/nothing-here', '-o', 'json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      node,
      desired: { node, generation: 1, resources: { maintenance: { type: 'flag', value: false } } },
      problems: [{ resource_key: 'gone', problem: 'nothing is at "etc/nothing-here"' }],
    });
  });

  it('refuses bad arguments before asking anyone, and says when no agent takes the read', async () => {
    const bad = await datum('import', 'IMP-3', 'welcome');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/"welcome" is not KEY=TYPE:NAME — fix: write each resource such as web=unit:nginx\.service/);
    const type = await datum('import', 'IMP-3', 'x=socket:/run/x');
    expect(type.code).toBe(2);
    expect(type.stderr).toMatch(/"socket" in "x=socket:\/run\/x" is not a resource type — fix: use one of /);
    const key = await datum('import', 'IMP-3', '9x=file:a');
    expect(key.code).toBe(2);
    expect(key.stderr).toMatch(/"9x" is not a resource key/);
    const nobody = await datum('import', 'IMP-NOBODY', 'a=file:a', '--timeout', '2s');
    expect(nobody.code).toBe(1);
    expect(nobody.stderr).toMatch(
      /the agent of IMP-NOBODY did not answer the import: .*— fix: check that `datum agent` serves IMP-NOBODY/,
    );
  });
});
