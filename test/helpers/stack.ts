// The whole loop for integration tests: a real dev server, the real controller worker in this
// process, real agents (runAgents) serving real node roots, and helpers to wait on what a user
// would watch (the state query, the ledger).
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import { promisify } from 'node:util';
import path from 'node:path';
import type { WorkflowHandle, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll } from 'vitest';
import { bundleWorkflowCode, type Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { LedgerEntry } from '../../src/domain';
import { runAgents, type RunningAgents } from '../../src/agent/worker';
import { stopServices } from '../../src/agent/services';
import { createControllerWorker } from '../../src/worker/controller';
import { keepFleetWatched, type FleetWatch } from '../../src/worker/fleet-watch';
import { workflowBundleOptions } from '../../src/worker/bundle';
import { projectRoot, temporalCliPath } from '../../src/worker/paths';

const run = promisify(execFile);
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_TYPES,
  ledgerQuery,
  reconcileWorkflowId,
  stateQuery,
  type NodeState,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { Fleet } from './fleet';
import { startDevEnv, webUiUrl, type DevEnvOptions } from './temporal';
import { until } from './until';
import { openLedgerStore, type LedgerStore } from '../../src/activities/ledger-store';
import { startTogether } from './processes';

/** A run's history, counted: its events, and the activities it scheduled by type (observe, apply, watch). */
export interface HistoryCounts {
  events: number;
  scheduled: Record<string, number>;
}

/** What a started Stack holds: the dev server, the fleet directory, the workflow bundle, the ledger store. */
interface Started {
  env: TestWorkflowEnvironment;
  fleet: Fleet;
  bundle: WorkflowBundleWithSourceMap;
  ledgerStore: LedgerStore;
}

/** Another queue (with another fleet: a lagging controller), or a shorter work-item escalation. */
export interface ControllerOptions {
  taskQueue?: string;
  fleetDir?: string;
  workEscalateAfter?: string;
  /**
   * How often the fleet workflow looks (default 60s), which a controller on datum-control keeps
   * running as `datum worker` does; false starts none (a test that counts every workflow).
   */
  fleetInterval?: string | false;
  /** The worker's loop cache (maxCachedWorkflows); unset: as many as fit the heap. */
  maxCachedWorkflows?: number;
}

export class Stack {
  readonly agents = new Map<string, RunningAgents>();
  private readonly controllers: { worker: Worker; run: Promise<void>; watch: FleetWatch | null }[] = [];
  private parts: Started | undefined;

  /** Options: those of startDevEnv, e.g. `{ ui: true }` for a dev server that serves its Web UI too. */
  static async start(options: DevEnvOptions = {}): Promise<Stack> {
    return new Stack().start(options);
  }

  /** Starts this Stack (once); `Stack.start` and `useStack` call it. */
  async start(options: DevEnvOptions = {}): Promise<this> {
    if (this.parts) throw new Error('this Stack is already started');
    const [env, fleet, bundle] = await startTogether([
      startDevEnv(options),
      Fleet.create(),
      bundleWorkflowCode({ ...workflowBundleOptions(), logger: quietLogger }),
    ]);
    const ledgerStore = await openLedgerStore({ url: `sqlite:${path.join(fleet.dir, 'ledger.sqlite')}` }).catch(
      async (e: unknown) => {
        await env.teardown();
        await fleet.remove();
        throw e;
      },
    );
    this.parts = { env, fleet, bundle, ledgerStore };
    return this;
  }

  private get started(): Started {
    if (!this.parts) throw new Error('this Stack is not started yet: use it in a hook or a test, after useStack()');
    return this.parts;
  }

  get env(): TestWorkflowEnvironment {
    return this.started.env;
  }

  get fleet(): Fleet {
    return this.started.fleet;
  }

  get bundle(): WorkflowBundleWithSourceMap {
    return this.started.bundle;
  }

  get ledgerStore(): LedgerStore {
    return this.started.ledgerStore;
  }

  get client() {
    return this.env.client;
  }

  /** Base URL of the dev server's Web UI; only for a stack started with `{ ui: true }` (or `uiPort`). */
  get uiUrl(): string {
    const url = webUiUrl(this.env);
    if (url === undefined) throw new Error('this Stack serves no Web UI: start it with Stack.start({ ui: true })');
    return url;
  }

  /** A controller worker on datum-control (or another queue, with another fleet: a lagging controller). */
  async startController(options: ControllerOptions = {}): Promise<Worker> {
    const worker = await createControllerWorker({
      connection: this.env.nativeConnection,
      client: this.env.client,
      fleetDir: options.fleetDir ?? this.fleet.dir,
      taskQueue: options.taskQueue ?? CONTROL_TASK_QUEUE,
      workflowBundle: this.bundle,
      ledger: this.ledgerStore,
      ...(options.workEscalateAfter ? { workEscalateAfter: options.workEscalateAfter } : {}),
      ...(options.maxCachedWorkflows ? { maxCachedWorkflows: options.maxCachedWorkflows } : {}),
    });
    const onControl = (options.taskQueue ?? CONTROL_TASK_QUEUE) === CONTROL_TASK_QUEUE && options.fleetInterval !== false;
    const watch = onControl ? keepFleetWatched(this.env.client, { interval: options.fleetInterval || '60s' }) : null;
    this.controllers.push({ worker, run: worker.run(), watch });
    await watch?.started;
    return worker;
  }

  async startAgent(node: string): Promise<RunningAgents> {
    const agents = await runAgents({ configPaths: [this.fleet.agentFile(node)], connection: this.env.nativeConnection });
    this.agents.set(node, agents);
    return agents;
  }

  async stopAgent(node: string): Promise<void> {
    const agents = this.agents.get(node);
    this.agents.delete(node);
    await agents?.shutdown();
  }

  async startNode(
    node: string,
    generation: number,
    taskQueue = CONTROL_TASK_QUEUE,
  ): Promise<WorkflowHandleWithFirstExecutionRunId> {
    return this.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue,
      workflowId: reconcileWorkflowId(node, generation),
      args: [{ node, generation }],
    });
  }

  /** Polls the state query until `predicate` holds; fails with the last state and ledger otherwise. */
  async waitFor(
    handle: WorkflowHandle,
    predicate: (s: NodeState, ledger: LedgerEntry[]) => boolean,
    timeoutMs = 60_000,
  ): Promise<NodeState> {
    let ledger: LedgerEntry[] = [];
    return until(
      async () => {
        const [state, entries] = await Promise.all([handle.query(stateQuery), handle.query(ledgerQuery)]);
        ledger = entries;
        return state;
      },
      {
        what: `${handle.workflowId}'s state`,
        accept: (state) => predicate(state, ledger),
        errors: 'retry',
        timeoutMs,
        context: () =>
          `ledger:\n  ${ledger.map((e) => `#${e.seq} ${e.convergence_status}/${e.reason}: ${e.reason_detail}`).join('\n  ')}`,
      },
    );
  }

  /**
   * Waits for a pass that judged a fresh snapshot taken after `since` (epoch ms or an ISO time):
   * the state query's last_verified_at has moved past it. This is the positive event a test
   * needs before it asserts that a pass acted on nothing (after a sleep, perhaps no pass ran).
   * `passes` > 1 waits for that many such passes in a row. Returns the state after the last.
   */
  async waitForPass(handle: WorkflowHandle, since: number | string, passes = 1, timeoutMs = 60_000): Promise<NodeState> {
    let after = typeof since === 'number' ? since : Date.parse(since);
    let state: NodeState | undefined;
    for (let i = 0; i < passes; i++) {
      state = await this.waitFor(handle, (s) => s.last_verified_at !== null && Date.parse(s.last_verified_at) > after, timeoutMs);
      after = Date.parse(state.last_verified_at!);
    }
    return state!;
  }

  /** The run's history so far, counted: its events and the activities it scheduled, by type. */
  async historyCounts(handle: WorkflowHandle): Promise<HistoryCounts> {
    const history = await handle.fetchHistory();
    const scheduled: Record<string, number> = {};
    for (const e of history.events ?? []) {
      const type = e.activityTaskScheduledEventAttributes?.activityType?.name;
      if (type) scheduled[type] = (scheduled[type] ?? 0) + 1;
    }
    return { events: history.events?.length ?? 0, scheduled };
  }

  /**
   * Waits until `passes` more passes have been recorded than had when called (the state query's
   * passes.done): for passes whose snapshot is not fresh (stale, unreachable), where
   * last_verified_at does not move. Observes do not count them: a resync pass may decide on the
   * snapshot its watch took (patch watch-ends-at-resync), and schedules none.
   */
  async waitForPasses(
    handle: WorkflowHandle,
    passes: number,
    timeoutMs = 60_000,
  ): Promise<{ before: HistoryCounts & { passes: number }; after: HistoryCounts & { passes: number } }> {
    const counts = async () => ({ ...(await this.historyCounts(handle)), passes: (await this.state(handle)).passes?.done ?? 0 });
    const before = await counts();
    const after = await until(counts, {
      what: `${passes} passes after ${before.passes}`,
      accept: (c) => c.passes >= before.passes + passes,
      timeoutMs,
    });
    return { before, after };
  }

  /**
   * Waits until the run's watch activity is running on the agent (started there, or beating), and
   * a moment more for it to read its markers: a change made from now on wakes the loop. A watch
   * that ends at a short resync never lives long enough to beat (its first beat comes 14 s in).
   */
  async waitForWatch(handle: WorkflowHandle, timeoutMs = 30_000): Promise<void> {
    const started = temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED;
    await until(async () => (await handle.describe()).raw.pendingActivities ?? [], {
      what: `a running watch on ${handle.workflowId}`,
      accept: (pending) => pending.some((a) => a.activityType?.name === 'watch' && (a.lastHeartbeatTime || a.state === started)),
      timeoutMs,
      intervalMs: 100,
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
  }

  /**
   * With DATUM_RECORD_HISTORIES=1, saves the workflow's history under test/histories/ for the
   * replay test (a change that breaks running workflows must fail CI). Otherwise does nothing.
   */
  async recordHistory(handle: WorkflowHandle, name: string): Promise<void> {
    if (process.env.DATUM_RECORD_HISTORIES !== '1') return;
    // The temporal CLI writes the JSON form that historyFromJSON reads (the SDK's own
    // historyToJSON trips over two protobufjs copies in node_modules).
    const { stdout } = await run(
      temporalCliPath(),
      ['workflow', 'show', '--workflow-id', handle.workflowId, '--address', this.env.address, '--output', 'json'],
      {
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    // A release's histories are what running workflows of that release replay on newer code: they
    // are recorded once, under the release's version, and never re-recorded.
    const version = (JSON.parse(await fs.readFile(path.join(projectRoot(), 'package.json'), 'utf8')) as { version: string })
      .version;
    const file = path.join(projectRoot(), 'test', 'histories', version, `${name}.json`);
    await fs.mkdir(path.dirname(file), { recursive: true });
    try {
      await fs.writeFile(file, stdout, { flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      throw new Error(
        `${file} is already recorded: histories of release ${version} stay as they were recorded — fix: record after bumping package.json's version (a new release), or delete the file only if ${version} was never deployed`,
      );
    }
  }

  async ledger(handle: WorkflowHandle): Promise<LedgerEntry[]> {
    return handle.query(ledgerQuery);
  }

  async state(handle: WorkflowHandle): Promise<NodeState> {
    return handle.query(stateQuery);
  }

  /** Stops every controller worker (and the fleet watch each kept): nobody is left to look at the fleet. */
  async stopControllers(): Promise<void> {
    for (const c of this.controllers.splice(0)) {
      c.watch?.stop();
      if (c.worker.getState() === 'RUNNING') c.worker.shutdown();
      await c.run.catch(() => undefined);
    }
  }

  /** Stops the Temporal server, as an outage does; stop() then tears down the rest. */
  async stopServer(): Promise<void> {
    await this.stopControllers();
    if (this.serverStopped) return;
    this.serverStopped = true;
    await this.env.teardown();
  }

  private serverStopped = false;

  /** Stops what the Stack started, agents first; a Stack that never started has nothing to stop. */
  async stop(): Promise<void> {
    if (!this.parts) return;
    await Promise.all([...this.agents.keys()].map((n) => this.stopAgent(n)));
    await this.stopControllers();
    for (const node of await listNodes(this.fleet)) await stopServices(this.fleet.root(node)).catch(() => undefined);
    if (!this.serverStopped) await this.env.teardown();
    await this.ledgerStore.close();
    await this.fleet.remove();
  }
}

/**
 * The file's (or the describe block's) Stack, with one controller worker: started before its
 * tests, stopped after them. Hooks registered after this call run after the start and before the
 * stop (vitest runs after-hooks in reverse order). `controller: false` starts none.
 */
export function useStack(options: { controller?: ControllerOptions | false } = {}): Stack {
  const stack = new Stack();
  beforeAll(async () => {
    await stack.start();
    if (options.controller !== false) await stack.startController(options.controller);
  });
  afterAll(async () => {
    await stack.stop();
  });
  return stack;
}

async function listNodes(fleet: Fleet): Promise<string[]> {
  const { readdir } = await import('node:fs/promises');
  return readdir(`${fleet.dir}/nodes`).catch(() => []);
}

export const quietLogger = { trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => console.error(m), log() {} };

export const statusesOf = (ledger: LedgerEntry[]) => ledger.map((e) => `${e.convergence_status}/${e.reason}`);
