import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { reconcileWorkflowId } from '../../src/contract';
import { reachableClone, startAgentProcess, serving } from '../helpers/agent-process';
import { FAST_POLICY } from '../helpers/fleet';
import { useChildren } from '../helpers/processes';
import { useStack } from '../helpers/stack';

/*
 * Issue 18, hole 8, the filesystem's side (issue 35 split it from name-too-long.test.ts, whose
 * over-long segment is now refused by its spelling before the filesystem is asked): a filesystem
 * error on one resource's path made every observe of the node fail, so the node was
 * NODE_UNREACHABLE for good and its other resources were never repaired. Any errno of one
 * resource is now that resource's finding (src/agent/providers/types.ts observeGuarded).
 *
 * The error here is one no spelling check can see: the real `datum agent`, run as an unprivileged
 * user the way the packaged unit runs it (User=datum, no capabilities), meets a directory in its
 * root that a root process made mode 0700. Searching it is EACCES. The path is well spelled, and
 * the node's other resources are the agent's to write.
 */

const stack = useStack();
const children = useChildren();

/** nobody: a user that exists on every Debian-like host and owns nothing. */
const AGENT_USER = { uid: 65534, gid: 65534 };

let base: string;
let clone: { root: string; release: () => void };

beforeAll(async () => {
  base = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-errno-'));
  await fs.chmod(base, 0o755);
  clone = reachableClone(base);
});

afterAll(async () => {
  clone?.release();
  await fs.rm(base, { recursive: true, force: true });
});

describe('a filesystem error on one resource’s path that passes the spelling check (EACCES)', () => {
  it('is that resource’s finding with the errno and the fix; the node’s other resources converge, never NODE_UNREACHABLE', async () => {
    expect(process.getuid?.(), 'the test makes a directory its agent may not search: it runs as root').toBe(0);
    const node = 'EA-1';
    const root = path.join(base, 'root');
    const runtime = path.join(base, 'runtime');
    await fs.mkdir(path.join(root, 'srv/private'), { recursive: true });
    await fs.mkdir(runtime);
    for (const dir of [root, path.join(root, 'srv'), runtime]) await fs.chown(dir, AGENT_USER.uid, AGENT_USER.gid);
    // A root process's directory in the node's root: root's, mode 0700.
    await fs.chmod(path.join(root, 'srv/private'), 0o700);
    const agentFile = path.join(base, 'agent.yaml');
    await fs.writeFile(agentFile, stringify({ node, root, reconciliation: { mode: 'enforce' } }));
    await fs.writeFile(
      stack.fleet.desiredFile(node),
      stringify({
        node,
        generation: 1,
        resources: {
          private: { type: 'file', path: 'srv/private/app.conf', content: 'secret\n' },
          config: { type: 'file', path: 'etc/app.conf', content: 'ok\n' },
          maintenance: { type: 'flag', value: true },
        },
        policy: FAST_POLICY,
      }),
    );

    const agent = startAgentProcess([agentFile], stack.env.address, children, {
      ...AGENT_USER,
      // The host register and HOME of a service of that user: root's are not its to write.
      env: { DATUM_RUNTIME_DIR: runtime, HOME: runtime },
      datum: path.join(clone.root, 'bin', 'datum.js'),
    });
    await serving(agent);
    const handle = await stack.startNode(node, 1);
    const state = await stack.waitFor(handle, (s) => s.reason !== null && s.convergence_status !== 'RETRY');

    // The one resource the agent cannot read is named with its errno and the fix ...
    expect(state, agent.output().slice(-3000)).toMatchObject({
      convergence_status: 'BLOCKED',
      reason: 'DESTRUCTIVE_REPAIR_REQUIRED',
    });
    const finding = state.conditions.find((c) => c.resource_key === 'private');
    expect(finding?.message).toMatch(
      /the agent may not read or search it \(EACCES\) — fix: give the agent's user access to the path/,
    );
    expect(state.conditions.map((c) => c.type)).not.toContain('NODE_UNREACHABLE');
    // ... and the node's other resources were observed and written, by the agent's user.
    const config = await fs.stat(path.join(root, 'etc/app.conf'));
    expect(await fs.readFile(path.join(root, 'etc/app.conf'), 'utf8')).toBe('ok\n');
    expect(config.uid).toBe(AGENT_USER.uid);
    const ledger = await stack.ledger(handle);
    expect(ledger.flatMap((e) => e.execution_evidence.map((a) => `${a.resource_key}:${a.outcome}`))).toEqual(
      expect.arrayContaining(['config:applied', 'maintenance:applied']),
    );
    // Nothing was written where the agent may not go.
    expect(await fs.readdir(path.join(root, 'srv/private'))).toEqual([]);
    await stack.client.workflow.getHandle(reconcileWorkflowId(node, 1)).terminate('test done');
  });
});
