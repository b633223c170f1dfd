import type { ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import type { WorkflowHandle } from '@temporalio/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { operatorDecisionsOf } from '../../src/activities/ledger-store';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { reconcileWorkflowId, refreshDesiredSignal, resolveConflictSignal } from '../../src/contract';
import { FAST_POLICY, startConflictingWriter } from '../helpers/fleet';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { useChildren } from '../helpers/processes';

/*
 * The ledger store's copy of the operator decisions, attacked on real processes (dev server,
 * controller worker, agent, files on disk): what a new generation starts from when the store's
 * copy and the agent's record (.datum/decisions.json) could disagree. The store keeps the agent's
 * rules (docs/architecture.md §4 "Targets and operator decisions"), so both give one answer.
 */

// Its own controller, held to stop and restart it (withControllerStopped).
const stack = useStack({ controller: false });
let controller: Worker;
const children = useChildren();
beforeAll(async () => {
  controller = await stack.startController();
});

const CONFIG = 'etc/app/config.json';
const OURS = fileBytes({ workers: 8 });
const THEIRS = fileBytes({ workers: 2 });
const configFile = (node: string) => path.join(stack.fleet.root(node), CONFIG);
const file = (content: Record<string, unknown>) => ({ type: 'file', path: CONFIG, content });
const flag = (value: unknown) => ({ type: 'flag', value });
const wrote = (ledger: LedgerEntry[], key: string) =>
  ledger.flatMap((e) => e.execution_evidence).filter((ev) => ev.resource_key === key && ev.outcome === 'applied');

async function writeDoc(node: string, generation: number, resources: Record<string, unknown>): Promise<void> {
  await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation, resources, policy: FAST_POLICY }));
}

/** The refresh a rollout sends the node's loop for `generation` (its digest as the authority has it now). */
async function refreshFor(node: string, generation: number): Promise<{ generation: number; digest: string }> {
  const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
  if (!read.ok) throw new Error(read.error);
  return { generation, digest: read.intent.digest };
}

/** Generation 1 finds another writer on config: CONFLICT, recorded by the agent and the store. */
async function conflictOnConfig(node: string): Promise<{ gen1: WorkflowHandle; writer: ChildProcess }> {
  await stack.fleet.writeAgent(node, { mode: 'enforce' });
  await stack.startAgent(node);
  await writeDoc(node, 1, { config: file({ workers: 8 }), maintenance: flag(false) });
  const gen1 = await stack.startNode(node, 1);
  await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
  const writer = startConflictingWriter(configFile(node), THEIRS);
  children.push(writer);
  await stack.waitFor(gen1, (s) => s.convergence_status === 'CONFLICT');
  // The state query answers before the pass's entry reaches the store: wait for the store too.
  await until(async () => (await operatorDecisionsOf(stack.ledgerStore, node)).length > 0, {
    what: 'the store to hold the conflict',
    timeoutMs: 30_000,
  });
  expect((await operatorDecisionsOf(stack.ledgerStore, node)).map((d) => d.kind)).toEqual(['conflict']);
  return { gen1, writer };
}

/** Stops the controller worker until `meanwhile` is done: signals sent then reach the loop in one workflow task. */
async function withControllerStopped(meanwhile: () => Promise<void>): Promise<void> {
  controller.shutdown();
  for (let i = 0; controller.getState() !== 'STOPPED'; i++) {
    if (i > 300) throw new Error(`the controller worker did not stop (state ${controller.getState()})`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await meanwhile();
  controller = await stack.startController();
}

describe('the store keeps a true copy of the agent’s operator decisions', () => {
  it('a retake followed at once by a new rollout: the next generation repairs', async () => {
    const node = 'S-1';
    const { gen1, writer } = await conflictOnConfig(node);
    writer.kill('SIGKILL');
    await writeDoc(node, 2, { config: file({ workers: 8 }), maintenance: flag(true) });

    // The operator retakes config and a rollout hands over right after: both reach generation 1's
    // loop together, so it records the retake's note and hands over with no pass in between.
    const refresh = await refreshFor(node, 2);
    await withControllerStopped(async () => {
      await gen1.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'retake', by: 'oncall' });
      await gen1.signal(refreshDesiredSignal, refresh);
    });
    expect(await gen1.result()).toMatchObject({ convergence_status: 'SUPERSEDED' });
    const gen2 = stack.client.workflow.getHandle(reconcileWorkflowId(node, 2));
    const gen1Ledger = await stack.ledger(gen1);
    expect(gen1Ledger.slice(-2).map((e) => e.reason)).toEqual(['OPERATOR_RESOLUTION_RECORDED', 'NEWER_GENERATION']);

    // The retake holds: generation 2 writes Datum's config back, as the operator asked.
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    expect(wrote(await stack.ledger(gen2), 'config')).toHaveLength(1);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(OURS);
    expect(await operatorDecisionsOf(stack.ledgerStore, node)).toEqual([]);
    await gen2.terminate('test done');
  });

  it('a generation that changes the spec without writing it, then a revert on a node that lost .datum/: the conflict holds', async () => {
    const node = 'S-2';
    const { gen1, writer } = await conflictOnConfig(node);
    writer.kill('SIGKILL');

    // Generation 2 asks for workers: 16, but the operator keeps config in observe: nothing is written.
    await stack.fleet.writeAgent(node, { mode: 'enforce', resources: { config: 'observe' } });
    await writeDoc(node, 2, { config: file({ workers: 16 }), maintenance: flag(false) });
    await gen1.signal(refreshDesiredSignal, await refreshFor(node, 2));
    const gen2 = stack.client.workflow.getHandle(reconcileWorkflowId(node, 2));
    await stack.waitFor(gen2, (s) => s.convergence_status === 'DRIFTED');
    expect(wrote(await stack.ledger(gen2), 'config')).toEqual([]);

    // The node loses its .datum/ (a rebuilt disk) while its agent is down, observe is lifted, and
    // generation 3 goes back to workers: 8, the spec the conflict was about.
    await stack.stopAgent(node);
    await fs.rm(path.join(stack.fleet.root(node), '.datum'), { recursive: true, force: true });
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await writeDoc(node, 3, { config: file({ workers: 8 }), maintenance: flag(false) });
    await gen2.signal(refreshDesiredSignal, await refreshFor(node, 3));
    await stack.startAgent(node);

    // Only the store remembers the conflict now, and it must: nobody resolved it.
    const gen3 = stack.client.workflow.getHandle(reconcileWorkflowId(node, 3));
    await stack.waitFor(gen3, (s) => s.convergence_status === 'CONFLICT');
    await stack.waitForPass(gen3, Date.now(), 2);
    expect(wrote(await stack.ledger(gen3), 'config')).toEqual([]);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(THEIRS);
    await gen3.terminate('test done');
  });
});
