import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LedgerEntry } from '../../src/domain';
import { workflowBundleOptions } from '../../src/worker/bundle';
import {
  WORKFLOW_TYPES,
  agentTaskQueue,
  ledgerQuery,
  recheckSignal,
  stateQuery,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { fakeAuthority, fakeNode, type FakeAuthority, type FakeNode } from '../helpers/fake-node';
import { startTimeSkippingEnv } from '../helpers/temporal';
import { n24 } from '../unit/fixtures';
import { workflowMetricSinks } from '../../src/worker/workflow-metrics';

/*
 * The loop's timers on the time-skipping server: retry budget and backoff, a node offline for
 * two days, continue-as-new. Time here is skipped time; the fakes stamp what they see with it.
 */

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundleWithSourceMap;
const running: { worker: Worker; run: Promise<void> }[] = [];

function run(worker: Worker): Worker {
  running.push({ worker, run: worker.run() });
  return worker;
}

beforeAll(async () => {
  [env, bundle] = await Promise.all([startTimeSkippingEnv(), bundleWorkflowCode({ ...workflowBundleOptions(), logger: quiet })]);
});
afterAll(async () => {
  await env?.teardown();
});
afterEach(async () => {
  await Promise.all(
    running.splice(0).map(async ({ worker, run }) => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await run;
    }),
  );
});

async function startWorkers(node: FakeNode, authority: FakeAuthority) {
  const taskQueue = `control-${randomUUID()}`;
  const controller = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    sinks: workflowMetricSinks(),
    activities: authority.activities,
  });
  const agent = await Worker.create({
    connection: env.nativeConnection,
    taskQueue: agentTaskQueue('N-24'),
    activities: node.activities,
  });
  run(controller);
  run(agent);
  return { taskQueue, agent };
}

/**
 * Events of a pass woken by a recheck, measured with the resync timer kept: 2 fewer each than
 * with it cancelled and restarted (13 and 33 here; 13 and 29 in the bench's passes).
 */
const [STEADY_EVENTS, DRIFT_EVENTS] = [11, 31];

/** N-24's loop at generation 12, on the controller queue startWorkers made. */
const startLoop = ({ taskQueue }: { taskQueue: string }) =>
  env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
    taskQueue,
    workflowId: `datum/N-24/gen-12-${randomUUID()}`,
    args: [{ node: 'N-24', generation: 12 }],
  });

/** N-24's loop with a 10 m resync, after its first pass (1 minute of skipped time). */
async function convergedLoop(node: FakeNode) {
  const handle = await startLoop(
    await startWorkers(node, fakeAuthority(n24(12, { policy: { watch: false, resync_interval: '10m' } }))),
  );
  await env.sleep('1 minute');
  return handle;
}

const statuses = (ledger: LedgerEntry[]) => ledger.map((e) => `${e.convergence_status}/${e.reason}`);

/** The history events a recheck's pass adds, by type (EVENT_TYPE_ cut), as the bench counts a pass. */
async function recheckPassEvents(handle: WorkflowHandle<ReconcileNodeWorkflow>): Promise<string[]> {
  const before = (await handle.describe()).historyLength;
  await handle.signal(recheckSignal, {});
  await env.sleep('1 minute');
  const { events } = await handle.fetchHistory();
  return (events ?? [])
    .slice(before)
    .map((e) => (temporal.api.enums.v1.EventType[e.eventType ?? 0] ?? String(e.eventType)).replace('EVENT_TYPE_', ''));
}

describe('reconcileNode timers (time-skipping)', () => {
  it('probe 4 on the clock: backoff 5s then 10s, and BLOCKED when the budget of 3 is spent', async () => {
    const node = fakeNode({ ineffective: true });
    const { taskQueue } = await startWorkers(node, fakeAuthority());
    const handle = await env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue,
      workflowId: `datum/N-24/gen-12-${randomUUID()}`,
      args: [{ node: 'N-24', generation: 12 }],
    });
    await env.sleep('2 minutes');
    const ledger = await handle.query(ledgerQuery);
    expect(statuses(ledger).slice(0, 3)).toEqual([
      'RETRY/ACTION_INEFFECTIVE',
      'RETRY/ACTION_INEFFECTIVE',
      'BLOCKED/RETRY_BUDGET_EXHAUSTED',
    ]);
    expect(ledger.slice(0, 3).map((e) => [e.attempt_count, e.backoff.next_delay])).toEqual([
      [1, '5s'],
      [2, '10s'],
      [3, null],
    ]);
    // The applies themselves are spaced by the backoff timers (skipped time, not wall time).
    const applies = node.calls.filter((c) => c.name === 'apply' && c.action?.startsWith('build'));
    expect(applies).toHaveLength(3);
    expect(applies[1].at - applies[0].at).toBeGreaterThanOrEqual(5000);
    expect(applies[2].at - applies[1].at).toBeGreaterThanOrEqual(10000);
    // Budget spent: resync keeps observing but never acts again. Every apply is one of the three
    // attempts' (their evidence is in the first three entries), and passes observed after them.
    const allApplies = node.calls.filter((c) => c.name === 'apply');
    expect(allApplies).toHaveLength(ledger.slice(0, 3).flatMap((e) => e.execution_evidence).length);
    expect(ledger.slice(3).flatMap((e) => e.execution_evidence)).toEqual([]);
    const lastApply = allApplies[allApplies.length - 1].at;
    expect(node.calls.filter((c) => c.name === 'observe' && c.at > lastApply).length).toBeGreaterThanOrEqual(2);
    const state = await handle.query(stateQuery);
    expect(state).toMatchObject({
      convergence_status: 'BLOCKED',
      reason: 'RETRY_BUDGET_EXHAUSTED',
      attempt_count: 3,
      retry_budget: 3,
    });
    expect(state.conditions.map((c) => c.type)).toContain('RETRY_BUDGET_EXHAUSTED');
    await handle.terminate('test done');
  });

  // retry_budget 5 with the default backoff retries 5s, 10s, 20s and 40s apart (75s): a
  // repair_deadline of 20s ends the episode at the third attempt, whose retry would come at 35s.
  it.each([
    {
      name: 'repair_deadline 20s: BLOCKED/REPAIR_DEADLINE_EXCEEDED at the third attempt, budget left',
      policy: { retry_budget: 5, repair_deadline: '20s', watch: false },
      said: ['RETRY/ACTION_INEFFECTIVE', 'RETRY/ACTION_INEFFECTIVE', 'BLOCKED/REPAIR_DEADLINE_EXCEEDED'],
    },
    {
      name: 'no repair_deadline: the budget of 5 ends it, as before',
      policy: { retry_budget: 5, watch: false },
      said: [...Array<string>(4).fill('RETRY/ACTION_INEFFECTIVE'), 'BLOCKED/RETRY_BUDGET_EXHAUSTED'],
    },
  ])('a repair that never takes, $name', async ({ policy, said }) => {
    const node = fakeNode({ ineffective: true });
    const { taskQueue } = await startWorkers(node, fakeAuthority(n24(12, { policy })));
    const handle = await env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue,
      workflowId: `datum/N-24/gen-12-${randomUUID()}`,
      args: [{ node: 'N-24', generation: 12 }],
    });
    // Terminated whatever the outcome: a loop left waiting for a worker stops the server skipping time for the next test.
    try {
      await env.sleep('3 minutes');
      const ledger = await handle.query(ledgerQuery);
      expect(statuses(ledger).slice(0, said.length)).toEqual(said);
      // Nothing is tried after the decision that stopped the episode; later passes only observe.
      const attempts = said.length;
      expect(node.calls.filter((c) => c.name === 'apply' && c.action?.startsWith('build'))).toHaveLength(attempts);
      expect(ledger.slice(attempts).flatMap((e) => e.execution_evidence)).toEqual([]);
      const reason = said.at(-1)!.split('/')[1];
      const state = await handle.query(stateQuery);
      expect(state).toMatchObject({ convergence_status: 'BLOCKED', reason, attempt_count: attempts });
      expect(state.conditions.map((c) => c.type)).toContain(reason);
    } finally {
      await handle.terminate('test done');
    }
  });

  it('a node offline for two days: NODE_UNREACHABLE, then STALE_INTENT with the override untouched', async () => {
    const node = fakeNode();
    // The test server does not skip time while an activity task waits for a worker, so each
    // unreachable pass costs node_timeout of real time: keep it short and passes sparse.
    const policy = { resync_interval: '2h', node_timeout: '1s', watch: false };
    const authority = fakeAuthority(n24(12, { policy }));
    const { taskQueue, agent } = await startWorkers(node, authority);
    const handle = await env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue,
      workflowId: `datum/N-24/gen-12-${randomUUID()}`,
      args: [{ node: 'N-24', generation: 12 }],
    });
    await env.sleep('1 minute');
    expect((await handle.query(stateQuery)).convergence_status).toBe('CONVERGED');

    agent.shutdown();
    await env.sleep('2 days');
    const offline = await handle.query(stateQuery);
    expect(offline).toMatchObject({ convergence_status: 'BLOCKED', reason: 'NODE_UNREACHABLE' });
    expect(offline.conditions.map((c) => c.type)).toEqual(['NODE_UNREACHABLE']);
    const since = offline.conditions[0].since;

    // Meanwhile the authority moved on; the node comes back.
    authority.set(n24(13, { workers: 16, policy }));
    node.state.maintenance = true;
    run(
      await Worker.create({ connection: env.nativeConnection, taskQueue: agentTaskQueue('N-24'), activities: node.activities }),
    );
    await env.sleep('3 hours');
    const returned = await handle.query(stateQuery);
    expect(returned).toMatchObject({ convergence_status: 'BLOCKED', reason: 'STALE_INTENT', desired_generation: 12 });
    const ledger = await handle.query(ledgerQuery);
    const last = ledger[ledger.length - 1];
    expect(last.observation_fresh).toBe(true);
    expect(last.authorized_actions).toEqual([]);
    expect(last.operator_exceptions.map((e) => e.resource_key)).toEqual(['maintenance']);
    expect(node.state.maintenance).toBe(true);
    // Offline passes repeat the same decision: one ledger entry, not one per pass.
    expect(ledger.filter((e) => e.reason === 'NODE_UNREACHABLE')).toHaveLength(1);
    expect(ledger.find((e) => e.reason === 'NODE_UNREACHABLE')!.conditions[0].since).toBe(since);
    await handle.terminate('test done');
  });

  it('an agent away for one pass is asked again after policy.backoff, not at its resync two hours later', async () => {
    const node = fakeNode();
    const policy = { resync_interval: '2h', node_timeout: '1s', watch: false };
    const authority = fakeAuthority(n24(12, { policy }));
    const { taskQueue, agent } = await startWorkers(node, authority);
    const handle = await startLoop({ taskQueue });
    await env.sleep('1 minute');
    expect((await handle.query(stateQuery)).convergence_status).toBe('CONVERGED');

    agent.shutdown();
    await realTimeUntil(() => agent.getState() === 'STOPPED');
    // A pass now, in real time (the server skips none while the observe waits node_timeout).
    await handle.signal(recheckSignal, {});
    let away = await handle.query(stateQuery);
    await realTimeUntil(async () => (away = await handle.query(stateQuery)).reason === 'NODE_UNREACHABLE');
    expect(away.convergence_status).toBe('BLOCKED');
    const decidedAt = (await handle.query(ledgerQuery)).at(-1)!.decided_at;
    expect(Date.parse(away.recheck_trigger!.not_before!) - Date.parse(decidedAt)).toBe(5_000);

    // The agent is back: the loop's own re-probe finds it within the minute, not at the 2 h resync.
    run(
      await Worker.create({ connection: env.nativeConnection, taskQueue: agentTaskQueue('N-24'), activities: node.activities }),
    );
    await env.sleep('1 minute');
    const back = await handle.query(stateQuery);
    expect([back.convergence_status, back.reason]).toEqual(['CONVERGED', 'ALREADY_CONVERGED']);
    expect(Date.parse(back.last_verified_at!) - Date.parse(decidedAt)).toBeLessThan(60_000);
    expect(back.conditions).toEqual([]);
    await handle.terminate('test done');
  });

  it('a converged node observes once per resync_interval, not back to back', async () => {
    // Steady passes write no ledger entry; the wait must follow the last pass's own trigger,
    // not the due one of the entry it matched (which would spin the loop with 0 ms timers).
    const node = fakeNode();
    const authority = fakeAuthority(n24(12, { policy: { watch: false, resync_interval: '5m' } }));
    const { taskQueue } = await startWorkers(node, authority);
    const handle = await env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue,
      workflowId: `datum/N-24/gen-12-${randomUUID()}`,
      args: [{ node: 'N-24', generation: 12 }],
    });
    await env.sleep('1 minute');
    expect((await handle.query(stateQuery)).convergence_status).toBe('CONVERGED');
    const observesBefore = node.calls.filter((c) => c.name === 'observe').length;
    await env.sleep('2 hours');
    const passes = node.calls.filter((c) => c.name === 'observe').length - observesBefore;
    expect(passes).toBeGreaterThanOrEqual(23);
    expect(passes).toBeLessThanOrEqual(25);
    const state = await handle.query(stateQuery);
    expect(state.reason).toBe('ALREADY_CONVERGED');
    expect(state.recheck_trigger?.trigger).toBe('TIMER');
    expect(Date.parse(state.recheck_trigger!.not_before!) - Date.parse(state.last_verified_at!)).toBeGreaterThan(4 * 60_000);
    expect(await handle.query(ledgerQuery)).toHaveLength(1);
    await handle.terminate('test done');
  });

  it('a pass woken by a recheck keeps the resync timer: 2 events fewer per pass, the next resync at its time', async () => {
    const node = fakeNode();
    const handle = await convergedLoop(node);
    try {
      expect((await handle.query(stateQuery)).convergence_status).toBe('CONVERGED');
      const resyncDue = node.calls.filter((c) => c.name === 'observe').at(-1)!.at + 10 * 60_000;
      // A steady pass (the bench's verification pass) and a drift pass, both woken by a recheck.
      const steady = await recheckPassEvents(handle);
      Object.assign(node.state, { build: '7.3', app: { build: '7.3', config_sha256: node.state.config } });
      const drift = await recheckPassEvents(handle);
      const ledger = await handle.query(ledgerQuery);
      expect(statuses(ledger)).toEqual(['CONVERGED/CONVERGED_AFTER_REPAIR', 'CONVERGED/CONVERGED_AFTER_REPAIR']);
      // The ledger says when the loop looks next: the repair the recheck found promises the kept
      // timer's time (the first pass's), not resync_interval after itself.
      const [first, repair] = ledger.map((e) => e.recheck_trigger.not_before);
      expect(repair).toBe(first);
      expect(Date.parse(repair!)).toBeLessThan(Date.parse(ledger[1].decided_at) + 10 * 60_000);
      expect((await handle.query(stateQuery)).recheck_trigger?.not_before).toBe(first);
      // Before the patch each also cancelled the resync timer and started another.
      expect(steady.filter((t) => t.startsWith('TIMER'))).toEqual([]);
      expect(drift.filter((t) => t.startsWith('TIMER'))).toEqual([]);
      expect([steady.length, drift.length]).toEqual([STEADY_EVENTS, DRIFT_EVENTS]);
      // The next resync comes when the kept timer was set for, not resync_interval after the recheck.
      const lastPass = node.calls.at(-1)!.at;
      await env.sleep('9 minutes');
      const resyncs = node.calls.filter((c) => c.name === 'observe' && c.at > lastPass).map((c) => c.at);
      expect(resyncs).toHaveLength(1);
      expect(resyncs[0]).toBeGreaterThanOrEqual(resyncDue);
      expect(resyncs[0]).toBeGreaterThanOrEqual(Date.parse(first!));
      expect(resyncs[0]).toBeLessThan(lastPass + 10 * 60_000);
    } finally {
      await handle.terminate('test done');
    }
  });

  it('a run that continues as new while the kept resync timer runs leaves it behind: the new run resyncs on its own', async () => {
    const node = fakeNode();
    const handle = await convergedLoop(node);
    try {
      const firstRun = (await handle.describe()).runId;
      // Rechecks, a pass each, until the run's history is long enough to continue as new: the
      // wait a recheck ends leaves the timer running, so the run continues as new with it pending.
      for (let i = 0; i < 400 && (await handle.describe()).runId === firstRun; i++) {
        await handle.signal(recheckSignal, {});
        await env.sleep('1 second');
      }
      expect((await handle.describe()).runId).not.toBe(firstRun);
      // The new run's first pass, at once; then only its own resync timer wakes it.
      await env.sleep('1 second');
      const continuedAt = node.calls.at(-1)!.at;
      await env.sleep('11 minutes');
      expect(node.calls.filter((c) => c.name === 'observe' && c.at > continuedAt)).toHaveLength(1);
      expect((await handle.query(stateQuery)).convergence_status).toBe('CONVERGED');
    } finally {
      await handle.terminate('test done');
    }
  });

  it('continue-as-new keeps the ledger tail and the open conditions', async () => {
    const node = fakeNode({ mode: 'observe' });
    const authority = fakeAuthority();
    const { taskQueue } = await startWorkers(node, authority);
    const workflowId = `datum/N-24/gen-12-${randomUUID()}`;
    const handle = await env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue,
      workflowId,
      args: [{ node: 'N-24', generation: 12 }],
    });
    await env.sleep('1 minute');
    const before = await handle.query(stateQuery);
    expect(before.convergence_status).toBe('DRIFTED');
    expect(before.conditions.map((c) => c.type)).toContain('OBSERVED_DRIFT');
    const firstRun = (await handle.describe()).runId;

    await env.sleep('6 hours');
    const after = env.client.workflow.getHandle(workflowId);
    const description = await after.describe();
    expect(description.runId).not.toBe(firstRun);
    expect(description.historyLength).toBeLessThan(2100);
    const state = await after.query(stateQuery);
    expect(state.conditions).toEqual(before.conditions);
    const ledger = await after.query(ledgerQuery);
    expect(ledger[0].seq).toBe(1);
    expect(statuses(ledger)).toEqual(['DRIFTED/OBSERVE_MODE_DRIFT']);
    // The store took the entry once, across both runs of the chain.
    expect([...authority.stored.values()].map((e) => e.seq)).toEqual([1]);
    expect(Date.parse(state.last_verified_at!)).toBeGreaterThan(Date.parse(before.last_verified_at!) + 5 * 3600_000);
    await after.terminate('test done');
  });
});

/** Polls in real time (the server skips no time meanwhile) until `done`, for at most 30 s. */
async function realTimeUntil(done: () => boolean | Promise<boolean>): Promise<void> {
  for (const started = Date.now(); !(await done());) {
    if (Date.now() - started > 30_000) throw new Error(`not so within 30 s: ${done.toString()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => console.error(m), log() {} };
