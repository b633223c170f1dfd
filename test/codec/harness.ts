// A Datum stack with the payload codec on, for test/codec: a real dev server, the real controller
// worker and agents in this process, and a client, each built the way the product builds them:
// from DATUM_CODEC_KEYS / DATUM_CODEC_KEY_ID as they are when the part starts. Switching keyrings
// between starts is how these tests rotate keys, drop one, or give an agent a wrong one.
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, type WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, type Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { openLedgerStore, type LedgerStore } from '../../src/activities/ledger-store';
import { runAgents, type RunningAgents } from '../../src/agent/worker';
import { stopServices } from '../../src/agent/services';
import { codecDataConverter } from '../../src/codec';
import { WORKFLOW_TYPES, CONTROL_TASK_QUEUE, reconcileWorkflowId, stateQuery, type NodeState } from '../../src/contract';
import { createControllerWorker } from '../../src/worker/controller';
import { workflowBundleOptions } from '../../src/worker/bundle';
import { Fleet } from '../helpers/fleet';
import { quietLogger } from '../helpers/stack';
import { startDevEnv, type DevEnvOptions } from '../helpers/temporal';
import { until } from '../helpers/until';
import { startTogether } from '../helpers/processes';

export const newKey = () => randomBytes(32).toString('base64');

/** A keyring file of its own (id -> base64 key) and the env that selects it. */
export async function writeKeyring(dir: string, name: string, keys: Record<string, string>, active?: string) {
  const file = path.join(dir, `${name}.json`);
  await fs.writeFile(file, JSON.stringify(keys), { mode: 0o600 });
  return { DATUM_CODEC_KEYS: file, ...(active ? { DATUM_CODEC_KEY_ID: active } : {}) };
}

export type CodecEnv = Awaited<ReturnType<typeof writeKeyring>>;

/** Runs `start` with the process environment set to `vars` for the codec (and restores it). */
export async function withCodecEnv<T>(vars: CodecEnv, start: () => Promise<T>): Promise<T> {
  const saved = { keys: process.env.DATUM_CODEC_KEYS, id: process.env.DATUM_CODEC_KEY_ID };
  process.env.DATUM_CODEC_KEYS = vars.DATUM_CODEC_KEYS;
  if (vars.DATUM_CODEC_KEY_ID) process.env.DATUM_CODEC_KEY_ID = vars.DATUM_CODEC_KEY_ID;
  else delete process.env.DATUM_CODEC_KEY_ID;
  try {
    return await start();
  } finally {
    for (const [name, value] of [
      ['DATUM_CODEC_KEYS', saved.keys],
      ['DATUM_CODEC_KEY_ID', saved.id],
    ] as const)
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
  }
}

export class CodecStack {
  private controller?: { worker: Worker; run: Promise<void> };
  private agents?: RunningAgents;

  private constructor(
    readonly env: TestWorkflowEnvironment,
    readonly fleet: Fleet,
    readonly bundle: WorkflowBundleWithSourceMap,
    readonly ledger: LedgerStore,
    readonly keysDir: string,
  ) {}

  static async start(options: DevEnvOptions = {}): Promise<CodecStack> {
    const [env, fleet, bundle, keysDir] = await startTogether([
      startDevEnv(options),
      Fleet.create('datum-codec-fleet-'),
      bundleWorkflowCode({ ...workflowBundleOptions(), logger: quietLogger }),
      fs.mkdtemp(path.join(os.tmpdir(), 'datum-codec-keys-')),
    ]);
    const ledger = await openLedgerStore({ url: `sqlite:${path.join(fleet.dir, 'ledger.sqlite')}` });
    return new CodecStack(env, fleet, bundle, ledger, keysDir);
  }

  /** A client with the codec of `vars`, as `connectClient` builds one. */
  client(vars: CodecEnv): Promise<Client> {
    return withCodecEnv(vars, () =>
      Promise.resolve(new Client({ connection: this.env.connection, dataConverter: codecDataConverter() })),
    );
  }

  async startController(vars: CodecEnv): Promise<void> {
    await this.stopController();
    const client = await this.client(vars);
    const worker = await withCodecEnv(vars, () =>
      createControllerWorker({
        connection: this.env.nativeConnection,
        client,
        fleetDir: this.fleet.dir,
        workflowBundle: this.bundle,
        ledger: this.ledger,
      }),
    );
    this.controller = { worker, run: worker.run() };
  }

  async stopController(): Promise<void> {
    const c = this.controller;
    this.controller = undefined;
    if (!c) return;
    if (c.worker.getState() === 'RUNNING') c.worker.shutdown();
    await c.run.catch(() => undefined);
  }

  async startAgent(node: string, vars: CodecEnv): Promise<void> {
    await this.stopAgent();
    this.agents = await withCodecEnv(vars, () =>
      runAgents({ configPaths: [this.fleet.agentFile(node)], connection: this.env.nativeConnection }),
    );
  }

  async stopAgent(): Promise<void> {
    const a = this.agents;
    this.agents = undefined;
    await a?.shutdown();
  }

  startNode(client: Client, node: string, generation: number) {
    return client.workflow.start(WORKFLOW_TYPES.reconcileNode, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: reconcileWorkflowId(node, generation),
      args: [{ node, generation }],
    });
  }

  async stop(): Promise<void> {
    await this.stopAgent();
    await this.stopController();
    const nodes = await fs.readdir(path.join(this.fleet.dir, 'nodes')).catch(() => []);
    for (const node of nodes) await stopServices(this.fleet.root(node)).catch(() => undefined);
    await this.env.teardown();
    await this.ledger.close();
    await this.fleet.remove();
    await fs.rm(this.keysDir, { recursive: true, force: true });
  }
}

/** Polls `state` until `predicate` holds; the last state or error in the timeout's message. */
export async function waitForState(
  handle: WorkflowHandle,
  predicate: (s: NodeState) => boolean,
  timeoutMs = 60_000,
): Promise<NodeState> {
  return until(() => handle.query(stateQuery), {
    what: `${handle.workflowId}'s state`,
    accept: predicate,
    errors: 'retry',
    timeoutMs,
  });
}

/** Every payload in a history with where it sits, search attributes aside (the server indexes those in clear). */
export function payloadsOf(
  history: temporal.api.history.v1.IHistory,
): Array<{ at: string; payload: temporal.api.common.v1.IPayload }> {
  const found: Array<{ at: string; payload: temporal.api.common.v1.IPayload }> = [];
  const walk = (value: unknown, at: string): void => {
    if (value === null || typeof value !== 'object' || value instanceof Uint8Array) return;
    const record = value as Record<string, unknown>;
    if (record.data instanceof Uint8Array && record.metadata && typeof record.metadata === 'object') {
      found.push({ at, payload: record });
      return;
    }
    for (const [key, child] of Object.entries(record)) if (key !== 'searchAttributes') walk(child, `${at}.${key}`);
  };
  (history.events ?? []).forEach((event, i) => walk(event, `events[${i}]:${event.eventType}`));
  return found;
}

/**
 * Payloads Temporal's core writes itself, in clear, into its markers: a local activity's
 * bookkeeping (`data`: seq, attempt, activity id and type, times) and a patch's id (`patch-data`).
 * Neither passes through a codec in any SDK; what a local activity returned (`result`) does.
 */
const CORE_MARKER_DETAILS = /\.markerRecordedEventAttributes\.details\.(data|patch-data)\.payloads\.\d+$/;
const CORE_MARKER_FIELDS = new Set([
  'seq',
  'attempt',
  'activity_id',
  'activity_type',
  'complete_time',
  'backoff',
  'original_schedule_time',
  'id',
  'deprecated',
]);

/** Whether a clear payload is one of core's marker bookkeeping payloads, and holds nothing else. */
export function isCoreMarkerData(at: string, payload: temporal.api.common.v1.IPayload): boolean {
  if (!CORE_MARKER_DETAILS.test(at)) return false;
  const value = JSON.parse(Buffer.from(payload.data ?? []).toString('utf8')) as Record<string, unknown>;
  return Object.keys(value).every((key) => CORE_MARKER_FIELDS.has(key));
}

/** The history in its stored (protobuf) form: what the server's database holds. */
export const historyBytes = (history: temporal.api.history.v1.IHistory): Buffer =>
  Buffer.from(temporal.api.history.v1.History.encode(history).finish());

export const metadataText = (p: temporal.api.common.v1.IPayload, key: string) =>
  Buffer.from(p.metadata?.[key] ?? []).toString('utf8');
