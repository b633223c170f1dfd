import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { fileBytes } from '../../src/domain';
import { reconcileWorkflowId, recheckSignal, refreshDesiredSignal, resolveConflictSignal } from '../../src/contract';
import { Fleet, MAINTENANCE, startConflictingWriter } from '../helpers/fleet';
import { statusesOf, useStack } from '../helpers/stack';
import { useChildren } from '../helpers/processes';

/*
 * The loop when the world misbehaves: a node that goes offline, another writer, an observe-mode
 * host, two generations racing on one node. Real server, real controller, real agents.
 */

const stack = useStack();
const children = useChildren();

const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const configFile = (node: string) => path.join(stack.fleet.root(node), 'etc/app/config.json');

async function digestOf(node: string, fleetDir = stack.fleet.dir): Promise<string> {
  const read = await new DesiredStateAuthority(fleetDir).read(node);
  if (!read.ok) throw new Error(read.error);
  return read.intent.digest;
}

async function converged(node: string, generation: number, options: Parameters<Fleet['writeDesired']>[2] = {}) {
  await stack.fleet.writeDesired(node, generation, options);
  if (!stack.agents.has(node)) {
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
  }
  const handle = await stack.startNode(node, generation);
  await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
  return handle;
}

async function servicePid(node: string): Promise<number> {
  return (JSON.parse(await fs.readFile(path.join(stack.fleet.root(node), '.datum/services/app.json'), 'utf8')) as { pid: number })
    .pid;
}

function startWriter(file: string, content: string): ChildProcess {
  const child = startConflictingWriter(file, content);
  children.push(child);
  return child;
}

describe('node offline', () => {
  it('NODE_UNREACHABLE while away; back with a newer authority: STALE_INTENT until refreshDesired, override never overwritten', async () => {
    const node = 'F-1';
    const gen1 = await converged(node, 1);
    await stack.stopAgent(node);
    const away = await stack.waitFor(gen1, (s) => s.convergence_status === 'BLOCKED');
    expect(away).toMatchObject({ reason: 'NODE_UNREACHABLE', recheck_trigger: { trigger: 'FRESH_OBSERVATION' } });
    expect(away.conditions.map((c) => c.type)).toEqual(['NODE_UNREACHABLE']);

    // While the node is away: the authority moves to generation 2 and the operator puts the
    // node in maintenance locally.
    await stack.fleet.writeDesired(node, 2, { workers: 16 });
    await stack.fleet.writeAgent(node, { mode: 'enforce', overrides: { maintenance: MAINTENANCE } });
    const flag = path.join(stack.fleet.root(node), 'flags/maintenance.json');
    await fs.writeFile(flag, 'true\n');
    await stack.startAgent(node);

    const back = await stack.waitFor(gen1, (s) => s.reason === 'STALE_INTENT');
    expect(back).toMatchObject({
      convergence_status: 'BLOCKED',
      recheck_trigger: { trigger: 'REFRESHED_INTENT' },
      desired_generation: 1,
    });
    const ledger = await stack.ledger(gen1);
    const stale = ledger[ledger.length - 1];
    expect(stale.observation_fresh).toBe(true); // a fresh snapshot, reclassified
    expect(stale.operator_exceptions.map((e) => e.resource_key)).toEqual(['maintenance']);
    expect(stale.authorized_actions).toEqual([]);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 8 }));

    await gen1.signal(refreshDesiredSignal, { generation: 2, digest: await digestOf(node) });
    const gen2 = stack.client.workflow.getHandle(reconcileWorkflowId(node, 2));
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 16 }));
    expect(await fs.readFile(flag, 'utf8')).toBe('true\n');
    const gen2Ledger = await stack.ledger(gen2);
    expect(gen2Ledger.flatMap((e) => e.authorized_actions.map((a) => a.resource_key))).toEqual(['config', 'app']);
    await gen2.terminate('test done');
    await stack.recordHistory(gen1, 'offline-stale-intent-handover');
  });
});

describe('conflicting writer', () => {
  it('another writer reverting a managed file gives CONFLICT with marker evidence, and yield leaves it to them', async () => {
    const node = 'C-1';
    const handle = await converged(node, 1);
    const theirs = fileBytes({ workers: 2 });
    startWriter(configFile(node), theirs);
    const conflict = await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');
    expect(conflict).toMatchObject({ reason: 'CONFLICTING_WRITER', recheck_trigger: { trigger: 'OPERATOR_RESOLUTION' } });
    expect(conflict.conditions.map((c) => [c.type, c.resource_key])).toEqual([['CONFLICTING_WRITER', 'config']]);
    const ledger = await stack.ledger(handle);
    const entry = ledger.find((e) => e.convergence_status === 'CONFLICT')!;
    const evidence = entry.conflicting_writer_evidence!.find((e) => e.resource_key === 'config')!;
    expect(evidence.sequence.length).toBeGreaterThanOrEqual(2);
    expect(evidence.sequence[0].marker).not.toBe(evidence.sequence[evidence.sequence.length - 1].marker);
    expect(evidence.sequence[evidence.sequence.length - 1].value).toBe(sha(theirs));

    // Repair stops: three more passes judge fresh snapshots of the conflict, and Datum acts in none.
    const acted = (entries: typeof ledger) =>
      entries.filter((e) => e.execution_evidence.length > 0 || e.authorized_actions.length > 0).length;
    const still = await stack.waitForPass(handle, Date.now(), 3);
    expect(still.convergence_status).toBe('CONFLICT');
    expect(acted(await stack.ledger(handle))).toBe(acted(ledger));

    await handle.signal(resolveConflictSignal, {
      resource_key: 'config',
      resolution: 'yield',
      by: 'oncall',
      note: 'the tuning daemon owns workers',
    });
    const yielded = await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    expect(yielded.conditions).toEqual([]);
    const after = await stack.ledger(handle);
    expect(after.some((e) => e.reason === 'OPERATOR_RESOLUTION_RECORDED' && e.reason_detail.includes('oncall'))).toBe(true);
    expect(after[after.length - 1].operator_exceptions.map((e) => e.resource_key)).toContain('config');
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(theirs);
    await handle.terminate('test done');
    await stack.recordHistory(handle, 'conflict-then-yield');
  });

  it('retake: once the other writer is gone Datum repairs again, and the condition clears on observation', async () => {
    const node = 'C-2';
    const handle = await converged(node, 1);
    const writer = startWriter(configFile(node), fileBytes({ workers: 3 }));
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');
    writer.kill('SIGKILL');
    await handle.signal(resolveConflictSignal, {
      resource_key: 'config',
      resolution: 'retake',
      by: 'alice',
      note: 'cron job removed',
    });
    const state = await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    expect(state.conditions).toEqual([]);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 8 }));
    const ledger = await stack.ledger(handle);
    const statuses = statusesOf(ledger);
    const resolvedAt = statuses.indexOf('CONFLICT/OPERATOR_RESOLUTION_RECORDED');
    expect(resolvedAt).toBeGreaterThan(0);
    expect(statuses.slice(resolvedAt + 1)).toContain('CONVERGED/CONVERGED_AFTER_REPAIR');
    expect(ledger[resolvedAt].reason_detail).toMatch(/alice resolved the conflict on "config" by retake \(cron job removed\)/);
    await handle.terminate('test done');
  });

  it('a resolveConflict for a resource with no conflict is recorded and changes nothing', async () => {
    const node = 'C-3';
    const handle = await converged(node, 1);
    const actedBefore = (await stack.ledger(handle)).filter((e) => e.authorized_actions.length > 0).length;
    await handle.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'retake', by: 'alice' });
    const state = await stack.waitFor(handle, (s) => s.conditions.some((c) => c.type === 'INVALID_SIGNAL'));
    expect(state.convergence_status).toBe('CONVERGED');
    expect(state.conditions[0].message).toMatch(/no conflict is open on "config"/);
    // Recorded: a ledger entry says the signal was rejected and why.
    const rejected = (await stack.ledger(handle)).find((e) => e.reason === 'SIGNAL_REJECTED');
    expect(rejected?.reason_detail).toMatch(/resolveConflict for "config" by alice rejected: no conflict is open on "config"/);
    // Changes nothing: the passes after it judge the node afresh, still converged, and act on nothing.
    const after = await stack.waitForPass(handle, Date.parse(rejected!.decided_at), 2);
    expect(after.convergence_status).toBe('CONVERGED');
    expect((await stack.ledger(handle)).filter((e) => e.authorized_actions.length > 0)).toHaveLength(actedBefore);
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 8 }));
    await handle.terminate('test done');
  });
});

describe('observe mode', () => {
  it('a malformed recheck raises INVALID_SIGNAL, and the next valid recheck closes it', async () => {
    const node = 'C-6';
    const handle = await converged(node, 1);
    await handle.signal(recheckSignal, { now: 'please' } as never);
    const raised = await stack.waitFor(handle, (s) => s.conditions.some((c) => c.type === 'INVALID_SIGNAL'));
    expect(raised.conditions.find((c) => c.type === 'INVALID_SIGNAL')?.message).toMatch(/A recheck signal was rejected/);
    await handle.signal(recheckSignal, {});
    const cleared = await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED' && s.conditions.length === 0);
    expect(cleared.conditions).toEqual([]);
    await handle.terminate('test done');
  });

  it('a drifted observe-mode host is DRIFTED and untouched; moving it to enforce repairs it', async () => {
    const node = 'O-1';
    const gen1 = await converged(node, 1, { version: '7.3' });
    await gen1.terminate('next generation');
    await stack.fleet.writeAgent(node, { mode: 'observe' });
    const configBefore = sha(await fs.readFile(configFile(node), 'utf8'));
    const pidBefore = await servicePid(node);

    await stack.fleet.writeDesired(node, 2, { version: '7.4', workers: 16 });
    const gen2 = await stack.startNode(node, 2);
    const state = await stack.waitFor(gen2, (s) => s.convergence_status === 'DRIFTED');
    expect(state).toMatchObject({ reason: 'OBSERVE_MODE_DRIFT', mode: 'observe' });
    expect(state.conditions.map((c) => [c.type, c.resource_key])).toEqual([
      ['OBSERVED_DRIFT', 'app'],
      ['OBSERVED_DRIFT', 'build'],
      ['OBSERVED_DRIFT', 'config'],
    ]);
    const ledger = await stack.ledger(gen2);
    expect(ledger[0].planned_actions.map((p) => `${p.resource_key}:${p.action}`)).toEqual([
      'build:release.install',
      'config:file.write',
      'app:service.restart',
    ]);
    expect(ledger.flatMap((e) => e.authorized_actions)).toEqual([]);
    // Two more passes judge the drifted host afresh; none authorizes or runs anything.
    expect((await stack.waitForPass(gen2, Date.now(), 2)).convergence_status).toBe('DRIFTED');
    const later = await stack.ledger(gen2);
    expect(later.flatMap((e) => [...e.authorized_actions, ...e.execution_evidence])).toEqual([]);
    expect(sha(await fs.readFile(configFile(node), 'utf8'))).toBe(configBefore);
    expect(await servicePid(node)).toBe(pidBefore);
    expect(await fs.readlink(path.join(stack.fleet.root(node), 'current'))).toBe('releases/7.3');

    // The operator moves the host to enforce, on the host: no restart of anything needed.
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await gen2.signal(recheckSignal, {});
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED' && s.mode === 'enforce');
    expect(await servicePid(node)).not.toBe(pidBefore);
    await gen2.terminate('test done');
    await stack.recordHistory(gen2, 'observe-then-enforce');
  });
});

describe('two generations racing on one node', () => {
  it('the older generation cannot act: the agent fences it and the ledger says why', async () => {
    const node = 'R-1';
    const gen2 = await converged(node, 2, { workers: 16 });
    // A controller whose checkout of the authority lags at generation 1.
    const lagging = await Fleet.create('datum-lagging-');
    try {
      await fs.cp(path.join(stack.fleet.dir, 'artifacts'), path.join(lagging.dir, 'artifacts'), { recursive: true });
      await lagging.writeDesired(node, 1, { workers: 8 });
      await stack.startController({ taskQueue: 'datum-control-lagging', fleetDir: lagging.dir });
      const gen1 = await stack.startNode(node, 1, 'datum-control-lagging');
      const state = await stack.waitFor(gen1, (s) => s.convergence_status === 'BLOCKED');
      expect(state.reason).toBe('ACTION_REFUSED');
      const ledger = await stack.ledger(gen1);
      const refused = ledger.flatMap((e) => e.execution_evidence).find((e) => e.outcome === 'refused')!;
      expect(refused.resource_key).toBe('config');
      expect(refused.refusal).toMatch(/^StaleGenerationRefusal: .*generation 1.*generation 2/);
      expect(state.conditions.map((c) => c.type)).toContain('ACTION_REFUSED');
      expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 16 }));
      expect((await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED')).desired_generation).toBe(2);
      await gen1.terminate('test done');
    } finally {
      await gen2.terminate('test done');
      await lagging.remove();
    }
  });
});
