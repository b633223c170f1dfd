import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { operatorDecisionsOf } from '../../src/activities/ledger-store';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { reconcileWorkflowId, refreshDesiredSignal, resolveConflictSignal } from '../../src/contract';
import { FAST_POLICY, MAINTENANCE, startConflictingWriter } from '../helpers/fleet';
import { type Stack, useStack } from '../helpers/stack';
import { killChildren, useChildren } from '../helpers/processes';

/*
 * Holes 1 and 2 of issue 10, attacked with ordinary powers on real processes (dev server,
 * controller worker, agent, files on disk): an author who edits desired state (renames a
 * resource, adds a second release, starts a new generation) must not get past an operator's
 * protection or decision. See docs/architecture.md §4 "Targets and operator decisions".
 */

const stack = useStack();
const children = useChildren();

const CONFIG = 'etc/app/config.json';
const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const configFile = (node: string) => path.join(stack.fleet.root(node), CONFIG);
const file = (content: Record<string, unknown>) => ({ type: 'file', path: CONFIG, content });
const flag = (value: unknown) => ({ type: 'flag', value });

async function writeDoc(node: string, generation: number, resources: Record<string, unknown>): Promise<void> {
  await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation, resources, policy: FAST_POLICY }));
}

async function agentFor(node: string, options: Parameters<Stack['fleet']['writeAgent']>[1] = {}): Promise<void> {
  await stack.fleet.writeAgent(node, { mode: 'enforce', ...options });
  if (!stack.agents.has(node)) await stack.startAgent(node);
}

/** Hands the node's loop over to `generation`, as a rollout or `datum refresh` would. */
async function handOver(from: WorkflowHandle, node: string, generation: number): Promise<WorkflowHandle> {
  const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
  if (!read.ok) throw new Error(read.error);
  await from.signal(refreshDesiredSignal, { generation, digest: read.intent.digest });
  return stack.client.workflow.getHandle(reconcileWorkflowId(node, generation));
}

const entryOf = (e: LedgerEntry, key: string) => e.resources.find((r) => r.resource_key === key);
const wrote = (ledger: LedgerEntry[], key: string) =>
  ledger.flatMap((e) => e.execution_evidence).filter((ev) => ev.resource_key === key && ev.outcome === 'applied');
const decisionsOnDisk = async (node: string) =>
  JSON.parse(
    await fs.readFile(path.join(stack.fleet.root(node), '.datum/decisions.json'), 'utf8').catch(() => '{"targets":{}}'),
  ) as {
    targets: Record<string, { kind: string; resource_key: string; by: string }>;
  };

/** A conflict on config: Datum wrote it, another writer keeps reverting it. Returns their bytes. */
async function conflictOnConfig(node: string, handle: WorkflowHandle): Promise<{ theirs: string; writer: ChildProcess }> {
  const theirs = fileBytes({ workers: 2 });
  const writer = startConflictingWriter(configFile(node), theirs);
  children.push(writer);
  await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');
  return { theirs, writer };
}

describe('hole 1: protections follow the target, not the name', () => {
  it('renaming a resource does not escape its observe entry', async () => {
    const node = 'T-1';
    await fs.mkdir(path.dirname(configFile(node)), { recursive: true });
    const operators = fileBytes({ workers: 3 });
    await fs.writeFile(configFile(node), operators);
    await agentFor(node, { resources: { config: 'observe' } });
    await writeDoc(node, 1, { config: file({ workers: 8 }), maintenance: flag(false) });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'DRIFTED');

    // The author renames config to settings: same path, same content.
    await writeDoc(node, 2, { settings: file({ workers: 8 }), maintenance: flag(false) });
    const gen2 = await handOver(gen1, node, 2);
    const state = await stack.waitFor(gen2, (s) => s.convergence_status === 'DRIFTED');
    await stack.waitForPass(gen2, Date.now(), 2);
    expect(state.conditions.map((c) => [c.type, c.resource_key])).toEqual([['OBSERVED_DRIFT', 'settings']]);
    const ledger = await stack.ledger(gen2);
    const last = ledger[ledger.length - 1];
    expect(entryOf(last, 'settings')).toMatchObject({ effective_mode: 'observe', drift: true });
    expect(ledger.flatMap((e) => e.authorized_actions)).toEqual([]);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(operators);
    await gen2.terminate('test done');
  });

  it('renaming a resource does not escape its override', async () => {
    const node = 'T-2';
    await agentFor(node);
    await writeDoc(node, 1, { config: file({ workers: 8 }), maintenance: flag(false) });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    // The operator takes the file over, by its key, with approval.
    const operators = fileBytes({ workers: 3 });
    await fs.writeFile(configFile(node), operators);
    await stack.fleet.writeAgent(node, { mode: 'enforce', overrides: { config: MAINTENANCE } });
    await stack.waitForPass(gen1, Date.now(), 1);

    await writeDoc(node, 2, { settings: file({ workers: 16 }), maintenance: flag(false) });
    const gen2 = await handOver(gen1, node, 2);
    const state = await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    await stack.waitForPass(gen2, Date.now(), 2);
    expect(state.desired_generation).toBe(2);
    const ledger = await stack.ledger(gen2);
    const last = ledger[ledger.length - 1];
    // The ledger shows the key that claims the file now, with the entry and target that protect it.
    expect(last.operator_exceptions).toEqual([
      expect.objectContaining({
        resource_key: 'settings',
        observed: sha(operators),
        provenance: expect.objectContaining({
          approved_by: MAINTENANCE.approved_by,
          protected_by: [{ entry: 'overrides.config', kind: 'override', target: `file:${CONFIG}` }],
        }) as unknown,
      }),
    ]);
    expect(entryOf(last, 'settings')?.ownership).toBe('OPERATOR_OWNED');
    expect(wrote(ledger, 'settings')).toEqual([]);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(operators);
    // The store holds the same.
    const stored = await stack.ledgerStore.list(node);
    expect(stored[stored.length - 1].operator_exceptions.map((e) => e.resource_key)).toEqual(['settings']);
    await gen2.terminate('test done');
  });

  it('a second release resource cannot take over current', async () => {
    const node = 'T-3';
    const v73 = await stack.fleet.artifact('7.3');
    const v74 = await stack.fleet.artifact('7.4');
    const release = (version: string, art: { name: string; sha256: string }) => ({
      type: 'release',
      version,
      artifact: `artifacts/${art.name}`,
      sha256: art.sha256,
    });
    await agentFor(node);
    await writeDoc(node, 1, { build: release('7.3', v73) });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    const current = path.join(stack.fleet.root(node), 'current');
    expect(await fs.readlink(current)).toBe('releases/7.3');
    await stack.fleet.writeAgent(node, { mode: 'enforce', overrides: { build: MAINTENANCE } });
    await stack.waitForPass(gen1, Date.now(), 1);

    // A second release under another key, in the next generation, would switch the one current link.
    await writeDoc(node, 2, { build2: release('7.4', v74) });
    const gen2 = await handOver(gen1, node, 2);
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    await stack.waitForPass(gen2, Date.now(), 2);
    const ledger = await stack.ledger(gen2);
    expect(entryOf(ledger[ledger.length - 1], 'build2')?.ownership).toBe('OPERATOR_OWNED');
    expect(wrote(ledger, 'build2')).toEqual([]);
    expect(await fs.readlink(current)).toBe('releases/7.3');

    // And both in one desired state is invalid, naming both keys and the target.
    await writeDoc(node, 3, { build: release('7.3', v73), build2: release('7.4', v74) });
    const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
    expect(read.ok).toBe(false);
    expect(!read.ok && read.error).toMatch(/resources\.build and resources\.build2 claim the same target release:current/);
    await gen2.terminate('test done');
  });
});

describe('hole 2: operator decisions outlive a generation', () => {
  it('a yield outlives the next generation', async () => {
    const node = 'T-4';
    await agentFor(node);
    await writeDoc(node, 1, { config: file({ workers: 8 }), maintenance: flag(false) });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    const { theirs } = await conflictOnConfig(node, gen1);
    await gen1.signal(resolveConflictSignal, {
      resource_key: 'config',
      resolution: 'yield',
      by: 'oncall',
      note: 'tuner owns it',
    });
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    expect((await decisionsOnDisk(node)).targets[`file:${CONFIG}`]).toMatchObject({ kind: 'yield', by: 'oncall' });
    killChildren(children);

    // The next generation changes something else; config's spec is the same.
    await writeDoc(node, 2, { config: file({ workers: 8 }), maintenance: flag(true) });
    const gen2 = await handOver(gen1, node, 2);
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    await stack.waitForPass(gen2, Date.now(), 2);
    const ledger = await stack.ledger(gen2);
    const last = ledger[ledger.length - 1];
    expect(entryOf(last, 'config')).toMatchObject({ ownership: 'OPERATOR_OWNED' });
    expect(last.operator_exceptions.map((e) => e.resource_key)).toEqual(['config']);
    expect(last.operator_decisions?.map((d) => [d.resource_key, d.kind, d.by])).toEqual([['config', 'yield', 'oncall']]);
    expect(wrote(ledger, 'config')).toEqual([]);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(theirs);
    // The ledger store holds the yield too, so it survives the agent's disk.
    expect((await operatorDecisionsOf(stack.ledgerStore, node)).map((d) => [d.resource_key, d.kind, d.target])).toEqual([
      ['config', 'yield', `file:${CONFIG}`],
    ]);
    await gen2.terminate('test done');
  });

  it('a yield outlives the next generation even when the node lost its own record of it', async () => {
    const node = 'T-7';
    await agentFor(node);
    await writeDoc(node, 1, { config: file({ workers: 8 }), maintenance: flag(false) });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    const { theirs } = await conflictOnConfig(node, gen1);
    await gen1.signal(resolveConflictSignal, {
      resource_key: 'config',
      resolution: 'yield',
      by: 'oncall',
      note: 'tuner owns it',
    });
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    killChildren(children);
    // The node loses .datum/decisions.json (a rebuilt disk, an operator's clean-up): only the
    // ledger store still knows about the yield.
    await fs.rm(path.join(stack.fleet.root(node), '.datum', 'decisions.json'), { force: true });

    await writeDoc(node, 2, { config: file({ workers: 8 }), maintenance: flag(true) });
    const gen2 = await handOver(gen1, node, 2);
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    await stack.waitForPass(gen2, Date.now(), 2);
    const ledger = await stack.ledger(gen2);
    expect(entryOf(ledger[ledger.length - 1], 'config')).toMatchObject({ ownership: 'OPERATOR_OWNED' });
    expect(wrote(ledger, 'config')).toEqual([]);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(theirs);
    // And the agent holds it again, so it refuses on its own too.
    expect((await decisionsOnDisk(node)).targets[`file:${CONFIG}`]).toMatchObject({ kind: 'yield', by: 'oncall' });
    await gen2.terminate('test done');
  });

  it('an open CONFLICT outlives the next generation and only retake resumes the repair', async () => {
    const node = 'T-5';
    await agentFor(node);
    await writeDoc(node, 1, { config: file({ workers: 8 }), maintenance: flag(false) });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    const { theirs, writer } = await conflictOnConfig(node, gen1);
    await stack.waitForPass(gen1, Date.now(), 1);
    expect((await decisionsOnDisk(node)).targets[`file:${CONFIG}`]).toMatchObject({ kind: 'conflict' });
    writer.kill('SIGKILL');

    await writeDoc(node, 2, { config: file({ workers: 8 }), maintenance: flag(true) });
    const gen2 = await handOver(gen1, node, 2);
    const state = await stack.waitFor(gen2, (s) => s.convergence_status === 'CONFLICT');
    await stack.waitForPass(gen2, Date.now(), 3);
    expect(state.conditions.map((c) => [c.type, c.resource_key])).toContainEqual(['CONFLICTING_WRITER', 'config']);
    expect(wrote(await stack.ledger(gen2), 'config')).toEqual([]);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(theirs);

    await gen2.signal(resolveConflictSignal, {
      resource_key: 'config',
      resolution: 'retake',
      by: 'alice',
      note: 'tuner removed',
    });
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 8 }));
    expect(wrote(await stack.ledger(gen2), 'config').length).toBeGreaterThan(0);
    expect((await decisionsOnDisk(node)).targets[`file:${CONFIG}`]).toBeUndefined();
    await gen2.terminate('test done');
  });

  it('a changed value of a yielded file waits for an operator, and a retake writes it', async () => {
    const node = 'T-6';
    await agentFor(node);
    await writeDoc(node, 1, { config: file({ workers: 8 }), maintenance: flag(false) });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    const { theirs } = await conflictOnConfig(node, gen1);
    await gen1.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'yield', by: 'oncall' });
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    killChildren(children);

    // New intent for config itself: workers 16. The yield stands until an operator decides.
    await writeDoc(node, 2, { config: file({ workers: 16 }), maintenance: flag(false) });
    const gen2 = await handOver(gen1, node, 2);
    const state = await stack.waitFor(gen2, (s) => s.conditions.some((c) => c.type === 'UNKNOWN_OWNERSHIP'));
    await stack.waitForPass(gen2, Date.now(), 2);
    const condition = state.conditions.find((c) => c.type === 'UNKNOWN_OWNERSHIP')!;
    expect(condition).toMatchObject({ resource_key: 'config', needs_judgement: true, resolver: 'operator' });
    expect(condition.message).toMatch(/yielded to another writer by oncall .*for another value/);
    expect(wrote(await stack.ledger(gen2), 'config')).toEqual([]);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(theirs);
    expect((await decisionsOnDisk(node)).targets[`file:${CONFIG}`]).toMatchObject({ kind: 'yield', by: 'oncall' });

    // The operator retakes it for the new value: Datum writes it, and the yield is over.
    await gen2.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'retake', by: 'alice' });
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED' && s.conditions.length === 0);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 16 }));
    expect((await decisionsOnDisk(node)).targets[`file:${CONFIG}`]).toBeUndefined();
    expect((await operatorDecisionsOf(stack.ledgerStore, node)).map((d) => d.target)).not.toContain(`file:${CONFIG}`);
    await gen2.terminate('test done');
  });
});
