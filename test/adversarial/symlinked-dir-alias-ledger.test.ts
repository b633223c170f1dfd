import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { LedgerEntry } from '../../src/domain';
import { FAST_POLICY, MAINTENANCE } from '../helpers/fleet';
import { useStack } from '../helpers/stack';

/*
 * Issue 18, hole 1, end to end: the dev server, the controller worker and a real agent process.
 * An operator overrides etc/app/app.conf; desired state writes conf/app.conf, and conf is a
 * symlink to etc/app inside the node root. Before the fix Datum wrote the operator's file through
 * the alias while the ledger listed the override as honoured (no exception under the key that
 * wrote it). Now the key that writes the file is the one the override protects: the ledger shows
 * it OPERATOR_OWNED with the entry and the target, and no write of it, and the file keeps its bytes.
 */

const stack = useStack();

const PROTECTED = 'etc/app/app.conf';
const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const wrote = (ledger: LedgerEntry[], key: string) =>
  ledger.flatMap((e) => e.execution_evidence).filter((ev) => ev.resource_key === key && ev.outcome === 'applied');

describe('attack: a symlinked directory inside the root as a second name for an overridden file', () => {
  it('is judged by the file it writes: no write, and the ledger shows the override on the key that writes it', async () => {
    const node = 'S-1';
    const root = stack.fleet.root(node);
    const operators = 'tuned by hand\n';
    await fs.mkdir(path.join(root, 'etc/app'), { recursive: true });
    await fs.writeFile(path.join(root, PROTECTED), operators);
    await fs.symlink('etc/app', path.join(root, 'conf'));
    const inode = (await fs.stat(path.join(root, PROTECTED))).ino;
    await stack.fleet.writeAgent(node, { mode: 'enforce', overrides: { [`file:${PROTECTED}`]: MAINTENANCE } });
    await stack.startAgent(node);
    const resources = {
      config: { type: 'file', path: 'conf/app.conf', content: 'from desired state\n' },
      maintenance: { type: 'flag', value: false },
    };
    await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation: 1, resources, policy: FAST_POLICY }));

    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    await stack.waitForPass(handle, Date.now(), 2);
    const ledger = await stack.ledger(handle);
    const last = ledger[ledger.length - 1];
    // Before the fix: config was written (an applied file.write) and operator_exceptions was empty.
    expect(wrote(ledger, 'config')).toEqual([]);
    expect(last.operator_exceptions).toEqual([
      expect.objectContaining({
        resource_key: 'config',
        observed: sha(operators),
        provenance: expect.objectContaining({
          approved_by: MAINTENANCE.approved_by,
          protected_by: [{ entry: `overrides.file:${PROTECTED}`, kind: 'override', target: `file:${PROTECTED}` }],
        }) as unknown,
      }),
    ]);
    expect(last.resources.find((r) => r.resource_key === 'config')?.ownership).toBe('OPERATOR_OWNED');
    expect(await fs.readFile(path.join(root, PROTECTED), 'utf8')).toBe(operators);
    expect((await fs.stat(path.join(root, PROTECTED))).ino).toBe(inode);
    await handle.terminate('test done');
  });
});
