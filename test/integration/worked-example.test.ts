import { promises as fs } from 'node:fs';
import path from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import { WorkflowNotFoundError, type WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { refreshDesiredSignal, reconcileWorkflowId, recheckSignal, workItemId } from '../../src/contract';
import { MAINTENANCE } from '../helpers/fleet';
import { D7, health } from '../helpers/service-health';
import { statusesOf, useStack } from '../helpers/stack';

/*
 * The seed's worked example and its four probes, end to end: real dev server, real controller,
 * a real agent on a temp directory, a real demo service answering its health endpoint.
 */

const stack = useStack();

/** The summaries of the activities a run scheduled and the timers it started, in history order. */
async function summariesOf(handle: WorkflowHandle): Promise<{ activities: string[]; timers: string[] }> {
  const out = { activities: [] as string[], timers: [] as string[] };
  for (const event of (await handle.fetchHistory()).events ?? []) {
    const summary = event.userMetadata?.summary;
    if (!summary) continue;
    const text = defaultPayloadConverter.fromPayload<string>(summary);
    if (event.activityTaskScheduledEventAttributes) out.activities.push(text);
    if (event.timerStartedEventAttributes) out.timers.push(text);
  }
  return out;
}

async function digestOf(node: string): Promise<string> {
  const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
  if (!read.ok) throw new Error(read.error);
  return read.intent.digest;
}

/** Brings a node to the seed's starting point: 7.3 running on D7, maintenance overridden to on. */
async function n24Before(node: string) {
  await stack.fleet.writeDesired(node, 11, { version: '7.3' });
  await stack.fleet.writeAgent(node, { mode: 'enforce' });
  await stack.startAgent(node);
  const gen11 = await stack.startNode(node, 11);
  await stack.waitFor(gen11, (s) => s.convergence_status === 'CONVERGED');
  // The operator approves maintenance locally and turns it on by hand.
  await stack.fleet.writeAgent(node, { mode: 'enforce', overrides: { maintenance: MAINTENANCE } });
  // The loop sees the override before the hand writes the flag: a pass between the two would take
  // the hand's write for another writer's (CONFLICT), as a real operator doing it in that order would.
  await gen11.signal(recheckSignal, {});
  await stack.waitFor(gen11, (s, ledger) => ledger.some((e) => e.operator_exceptions.length > 0));
  await fs.writeFile(path.join(stack.fleet.root(node), 'flags/maintenance.json'), 'true\n');
  await gen11.signal(recheckSignal, {});
  await stack.waitFor(
    gen11,
    (s, ledger) => ledger.some((e) => e.operator_exceptions.length > 0) && s.convergence_status === 'CONVERGED',
  );
  return gen11;
}

describe('worked example: N-24 from 7.3 to 7.4 with config D7', () => {
  it('repairs only the managed drift, proves 7.4 + D7 from the running process, leaves maintenance alone', async () => {
    const node = 'N-24';
    const gen11 = await n24Before(node);
    const root = stack.fleet.root(node);
    expect(await health(root)).toMatchObject({ build: '7.3', config_sha256: D7 });
    const flag = path.join(root, 'flags/maintenance.json');
    const flagBefore = await fs.stat(flag);

    await stack.fleet.writeDesired(node, 12, { version: '7.4' });
    await gen11.signal(refreshDesiredSignal, { generation: 12, digest: await digestOf(node) });
    expect(await gen11.result()).toMatchObject({
      convergence_status: 'SUPERSEDED',
      superseded_by: reconcileWorkflowId(node, 12),
    });

    const gen12 = stack.client.workflow.getHandle(reconcileWorkflowId(node, 12));
    const state = await stack.waitFor(gen12, (s) => s.convergence_status === 'CONVERGED');
    expect(state).toMatchObject({ desired_generation: 12, conditions: [] });

    const ledger = await stack.ledger(gen12);
    const repair = ledger.find((e) => e.authorized_actions.length > 0)!;
    expect(repair.reason).toBe('CONVERGED_AFTER_REPAIR');
    // The state shows the latest pass: the repair itself, or a steady pass after it (not written).
    expect([repair.reason, 'ALREADY_CONVERGED']).toContain(state.reason);
    expect(repair.authorized_actions.map((a) => `${a.resource_key}:${a.action}`)).toEqual([
      'build:release.install',
      'app:service.restart',
    ]);
    expect(repair.execution_evidence.map((e) => e.outcome)).toEqual(['applied', 'applied']);
    expect(repair.operator_exceptions).toEqual([
      { resource_key: 'maintenance', provenance: MAINTENANCE, desired: false, observed: true },
    ]);
    expect(repair.convergence_status).toBe('CONVERGED');

    // Proof from the thing itself: the process answers 7.4 and D7; current points at 7.4.
    expect(await health(root)).toMatchObject({ build: '7.4', config_sha256: D7 });
    expect(await fs.readlink(path.join(root, 'current'))).toBe('releases/7.4');
    const flagAfter = await fs.stat(flag);
    expect(await fs.readFile(flag, 'utf8')).toBe('true\n');
    expect([flagAfter.ino, flagAfter.mtimeMs]).toEqual([flagBefore.ino, flagBefore.mtimeMs]);

    // The fleet-wide store holds the same entries as the workflow, across both generations.
    const stored = await stack.ledgerStore.list(node);
    expect(stored.filter((e) => e.workflow_id === gen12.workflowId).map((e) => e.seq)).toEqual(ledger.map((e) => e.seq));
    expect(stored.find((e) => e.seq === repair.seq && e.workflow_id === gen12.workflowId)).toEqual(repair);
    const gen11Ledger = await stack.ledger(gen11);
    expect(statusesOf(gen11Ledger).slice(-1)).toEqual(['SUPERSEDED/NEWER_GENERATION']);

    // The Web UI's timeline reads as the loop: each activity and timer carries its summary.
    const summaries = await summariesOf(gen12);
    const repairPass = summaries.activities.slice(summaries.activities.indexOf(`apply release.install build`) - 1);
    // The last apply takes the probe that proves both (its summary says so), not an observe of its own.
    expect(repairPass.slice(0, 3)).toEqual([
      `observe ${node}`,
      'apply release.install build',
      'apply service.restart app, then probe',
    ]);
    expect(repairPass).not.toContain(`probe ${node}`);
    // The loop then waits on its resync: the watch that ends there and observes (patch
    // watch-ends-at-resync), where it used to be a timer.
    expect(summaries.activities).toContain(`watch ${node} until its resync`);
    expect(summaries.timers).not.toContain('resync');
    await gen12.terminate('test done');
    await stack.recordHistory(gen11, 'worked-example-gen11-superseded');
    await stack.recordHistory(gen12, 'worked-example-gen12');
  });

  it('raised to generation 12 before the rollout: gen-11 says STALE_INTENT only, no digest-mismatch condition nor work item', async () => {
    // README step 2: the next generation is copied into the authority, then rolled out. Between
    // the two, gen-11 sees an authority at 12 with other content: its intent is stale, and that
    // is all the evidence shows (generation 11's own content did not change).
    const node = 'N-24r';
    const gen11 = await n24Before(node);
    await stack.fleet.writeDesired(node, 12, { version: '7.4' });
    await gen11.signal(recheckSignal, {});
    const stale = await stack.waitFor(gen11, (s) => s.reason === 'STALE_INTENT');
    expect(stale.conditions.map((c) => c.type)).toEqual(['STALE_INTENT']);
    const entry = (await stack.ledger(gen11)).find((e) => e.reason === 'STALE_INTENT')!;
    expect(`${entry.convergence_status}/${entry.reason}`).toBe('BLOCKED/STALE_INTENT');
    expect(entry.conditions.map((c) => c.type)).toEqual(['STALE_INTENT']);
    expect(entry.reason_detail).toContain('the authority is at generation 12');

    await gen11.signal(refreshDesiredSignal, { generation: 12, digest: await digestOf(node) });
    expect(await gen11.result()).toMatchObject({ convergence_status: 'SUPERSEDED' });
    // Every report gen-11 made is in by its end: none opened an item asking to raise the generation.
    const item = stack.client.workflow.getHandle(workItemId(node, 'INTENT_DIGEST_MISMATCH', null));
    await expect(item.describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
    await stack.client.workflow.getHandle(reconcileWorkflowId(node, 12)).terminate('test done');
  });
});

describe('the four probes', () => {
  it('probe 1: a snapshot older than observation_ttl never drives an action', async () => {
    const node = 'P-1';
    await stack.fleet.writeDesired(node, 1, { version: '7.3' });
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    await gen1.terminate('next generation');

    // Every snapshot is older than 1ms by the time the workflow judges it.
    await stack.fleet.writeDesired(node, 2, { version: '7.4', policy: { observation_ttl: '1ms' } });
    const gen2 = await stack.startNode(node, 2);
    const state = await stack.waitFor(gen2, (s) => s.convergence_status === 'BLOCKED');
    expect(state).toMatchObject({ reason: 'STALE_OBSERVATION', recheck_trigger: { trigger: 'FRESH_OBSERVATION' } });
    // Three more passes, each on a new (and again stale) snapshot: last_verified_at never moves
    // for a stale one, so the passes are counted by the observations the loop asked for.
    const { after } = await stack.waitForPasses(gen2, 3);
    expect(after.scheduled.apply ?? 0).toBe(0);
    expect(await stack.state(gen2)).toMatchObject({
      convergence_status: 'BLOCKED',
      reason: 'STALE_OBSERVATION',
      last_verified_at: null,
    });
    const ledger = await stack.ledger(gen2);
    expect(ledger.length).toBeGreaterThan(0);
    expect(ledger.every((e) => e.authorized_actions.length === 0 && e.execution_evidence.length === 0)).toBe(true);
    expect(await fs.readlink(path.join(stack.fleet.root(node), 'current'))).toBe('releases/7.3');
    expect((await health(stack.fleet.root(node))).build).toBe('7.3');
    await gen2.terminate('test done');
  });

  it('probe 2: an operator-only difference gives no action', async () => {
    const node = 'P-2';
    await stack.fleet.writeDesired(node, 1, { version: '7.4' });
    await stack.fleet.writeAgent(node, { mode: 'enforce', overrides: { maintenance: MAINTENANCE } });
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const flag = path.join(stack.fleet.root(node), 'flags/maintenance.json');
    // The flag does not exist yet (operator-owned: Datum never wrote it); the operator sets it.
    await fs.mkdir(path.dirname(flag), { recursive: true });
    const before = await stack.ledger(handle);
    await fs.writeFile(flag, 'true\n');
    await handle.signal(recheckSignal, {});
    await stack.waitFor(handle, (_s, ledger) => ledger.some((e) => e.operator_exceptions.some((x) => x.observed === true)));
    const seen = (await stack.ledger(handle)).find((e) => e.operator_exceptions.some((x) => x.observed === true))!;
    // Two more passes after the one that saw the operator's flag: none acts on anything.
    const state = await stack.waitForPass(handle, Date.parse(seen.decided_at), 2);
    expect(state).toMatchObject({ convergence_status: 'CONVERGED', reason: 'ALREADY_CONVERGED' });
    const ledger = await stack.ledger(handle);
    expect(ledger.slice(before.length).flatMap((e) => [...e.authorized_actions, ...e.execution_evidence])).toEqual([]);
    expect(ledger.flatMap((e) => e.authorized_actions).map((a) => a.resource_key)).not.toContain('maintenance');
    expect(await fs.readFile(flag, 'utf8')).toBe('true\n');
    await handle.terminate('test done');
  });

  it('probe 3: replaying the same generation makes no new action on disk', async () => {
    const node = 'P-3';
    await stack.fleet.writeDesired(node, 1, { version: '7.4' });
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const first = await stack.startNode(node, 1);
    await stack.waitFor(first, (s) => s.convergence_status === 'CONVERGED');
    const root = stack.fleet.root(node);
    const release = await fs.stat(path.join(root, 'releases/7.4'));
    const before = await health(root);
    await first.terminate('replay');

    const replay = await stack.startNode(node, 1); // same workflow id, a new run
    const state = await stack.waitFor(replay, (s) => s.convergence_status === 'CONVERGED');
    expect(state.reason).toBe('ALREADY_CONVERGED');
    const ledger = await stack.ledger(replay);
    expect(ledger.flatMap((e) => e.authorized_actions)).toEqual([]);
    const after = await health(root);
    expect(after.pid).toBe(before.pid);
    const releaseAfter = await fs.stat(path.join(root, 'releases/7.4'));
    expect([releaseAfter.ino, releaseAfter.mtimeMs]).toEqual([release.ino, release.mtimeMs]);
    await replay.terminate('test done');
  });

  it('probe 4: an apply that "succeeds" while the service reports the old build gives RETRY, then BLOCKED', async () => {
    const node = 'P-4';
    await stack.fleet.writeDesired(node, 1, { version: '7.3' });
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    await gen1.terminate('next generation');

    // A 7.4 archive whose program still says 7.3: install and restart succeed, the probe disagrees.
    const broken = await stack.fleet.artifact('7.4', '7.3');
    await stack.fleet.writeDesired(node, 2, { version: '7.4', artifact: broken.name, policy: { retry_budget: 2 } });
    const gen2 = await stack.startNode(node, 2);
    const state = await stack.waitFor(gen2, (s) => s.convergence_status === 'BLOCKED', 90_000);
    expect(state).toMatchObject({ reason: 'RETRY_BUDGET_EXHAUSTED', attempt_count: 2 });
    const ledger = await stack.ledger(gen2);
    expect(statusesOf(ledger)).toEqual(['RETRY/ACTION_INEFFECTIVE', 'BLOCKED/RETRY_BUDGET_EXHAUSTED']);
    // The backoff between the two repairs is a timer the UI names with the attempt and the budget.
    expect((await summariesOf(gen2)).timers[0]).toBe('backoff 1/2');
    expect(ledger.every((e) => e.conflicting_writer_evidence === null)).toBe(true); // our own marker: not a conflict
    expect(ledger[0].execution_evidence.every((e) => e.outcome === 'applied')).toBe(true);
    expect((await health(stack.fleet.root(node))).build).toBe('7.3');
    await gen2.terminate('test done');
    await stack.recordHistory(gen2, 'probe4-retry-then-blocked');
  });
});
