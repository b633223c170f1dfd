import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { operatorDecisionsOf } from '../../src/activities/ledger-store';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { reconcileWorkflowId, refreshDesiredSignal, resolveConflictSignal } from '../../src/contract';
import { FAST_POLICY, startConflictingWriter } from '../helpers/fleet';
import { useStack } from '../helpers/stack';
import { killChildren, useChildren } from '../helpers/processes';

/*
 * Hole 5 of issue 18: a yield was bound to the canonical JSON of the spec, so a desired-state
 * author who wrote the same bytes spelled another way (the file's content as a string instead of
 * a mapping, keys reordered) made it a "changed spec": the yield ended as new
 * intent and Datum took the file back from the writer an operator had yielded it to. A yield is
 * about the value Datum would write; a re-spelling changes nothing, on real processes.
 */

const stack = useStack();
const children = useChildren();

const CONFIG = 'etc/app/config.json';
const configFile = (node: string) => path.join(stack.fleet.root(node), CONFIG);

async function writeDoc(node: string, generation: number, config: Record<string, unknown>): Promise<void> {
  const resources = { config: { type: 'file', path: CONFIG, ...config }, maintenance: { type: 'flag', value: false } };
  await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation, resources, policy: FAST_POLICY }));
}

async function handOver(from: WorkflowHandle, node: string, generation: number): Promise<WorkflowHandle> {
  const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
  if (!read.ok) throw new Error(read.error);
  await from.signal(refreshDesiredSignal, { generation, digest: read.intent.digest });
  return stack.client.workflow.getHandle(reconcileWorkflowId(node, generation));
}

const wrote = (ledger: LedgerEntry[], key: string) =>
  ledger.flatMap((e) => e.execution_evidence).filter((ev) => ev.resource_key === key && ev.outcome === 'applied');

describe('a re-spelled spec of a yielded file', () => {
  it('does not end the yield: the other writer keeps the file, and the ledger keeps the yield', async () => {
    const node = 'Y-1';
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    await writeDoc(node, 1, { content: { workers: 8 } });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    // Another writer keeps the file at its own bytes; the operator yields it to them.
    const theirs = fileBytes({ workers: 2 });
    children.push(startConflictingWriter(configFile(node), theirs));
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONFLICT');
    await gen1.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'yield', by: 'oncall', note: 'tuner' });
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    killChildren(children);

    // The author re-spells config: the very bytes Datum wrote, as a string instead of a mapping.
    await writeDoc(node, 2, { content: fileBytes({ workers: 8 }) });
    const gen2 = await handOver(gen1, node, 2);
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    await stack.waitForPass(gen2, Date.now(), 2);
    const ledger = await stack.ledger(gen2);
    const last = ledger[ledger.length - 1];
    // Before the fix: new intent, config written back to { workers: 8 }, the yield gone.
    expect(ledger.some((e) => (e.new_intent ?? []).length > 0)).toBe(false);
    expect(wrote(ledger, 'config')).toEqual([]);
    expect(last.resources.find((r) => r.resource_key === 'config')?.ownership).toBe('OPERATOR_OWNED');
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(theirs);
    expect((await operatorDecisionsOf(stack.ledgerStore, node)).map((d) => [d.target, d.kind, d.by])).toEqual([
      [`file:${CONFIG}`, 'yield', 'oncall'],
    ]);
    await gen2.terminate('test done');
  });
});
