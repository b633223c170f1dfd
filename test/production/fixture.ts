// A production-shaped cluster for a test file: `npm run cluster`'s own Cluster (PostgreSQL, the
// pinned Temporal server on it, datum worker and agent processes), on a fleet the test writes.
import { createHash } from 'node:crypto';
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { stringify } from 'yaml';
import { Cluster } from '../../src/cluster/cluster';
import { ClusterError } from '../../src/cluster/errors';
import { openLedgerStore, type LedgerStore } from '../../src/activities/ledger-store';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { ledgerQuery, stateQuery, type NodeState } from '../../src/contract';
import type { WorkflowHandle } from '@temporalio/client';
import { FAST_POLICY } from '../helpers/fleet';
import { auditPostgresLedger } from '../helpers/ledger-audit';
import { killProcessesUnder } from '../helpers/processes';
import { until } from '../helpers/until';

export const D7 = createHash('sha256')
  .update(fileBytes({ workers: 8 }))
  .digest('hex');

export interface ProductionStack {
  /** The cluster as this process last started or attached to it (`reattach` after another process's `up`). */
  cluster: Cluster;
  dataDir: string;
  client: Client;
  connection: Connection;
  ledger: LedgerStore;
  fleetDir: string;
  evidenceDir: string;
  stop(): Promise<void>;
}

/** A cluster on a fresh fleet directory (desired/nodes, agents, artifacts, nodes), on a free port range. */
/**
 * `ledger: false` leaves the PostgreSQL ledger unopened: opening it with this release migrates
 * its schema, which a previous release's worker then refuses (the upgrade test starts one).
 */
export async function startProductionStack(workers: number, options: { ledger?: boolean } = {}): Promise<ProductionStack> {
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-prod-')));
  await fs.chmod(base, 0o755); // as root, PostgreSQL runs as the postgres user, who must reach its directory
  const fleetDir = path.join(base, 'fleet');
  const evidenceDir = path.join(base, 'evidence');
  for (const d of ['desired/nodes', 'agents', 'artifacts', 'nodes']) await fs.mkdir(path.join(fleetDir, d), { recursive: true });
  await fs.mkdir(evidenceDir, { recursive: true });
  const dataDir = path.join(base, 'cluster');
  const cluster = await upOnFreePorts(dataDir, fleetDir, workers);
  const connection = await Connection.connect({ address: cluster.address });
  const client = new Client({ connection, namespace: cluster.namespace });
  const ledger = options.ledger === false ? unopened() : await openLedgerStore({ url: cluster.ledgerUrl });
  const stack: ProductionStack = {
    cluster,
    dataDir,
    client,
    connection,
    ledger,
    fleetDir,
    evidenceDir,
    async stop() {
      await ledger.close().catch(() => undefined);
      await connection.close().catch(() => undefined);
      // What DATA/cluster.json records now: an `up` by another process may have started parts anew.
      const current = (await Cluster.attach(dataDir).catch(() => null)) ?? stack.cluster;
      try {
        // The PostgreSQL ledger this release wrote keeps its invariants (test/helpers/ledger-audit.ts),
        // checked while its server still runs. Not with { ledger: false }: a previous release wrote it.
        if (options.ledger !== false) await auditPostgresLedger(current.ledgerUrl);
      } finally {
        await current.down();
        killProcessesUnder(base); // the services the agents started outlive them, as on a real node
        await fs.rm(base, { recursive: true, force: true });
      }
    },
  };
  return stack;
}

async function upOnFreePorts(dataDir: string, fleetDir: string, workers: number): Promise<Cluster> {
  for (let attempt = 1; ; attempt++) {
    const portBase = 20_000 + 20 * Math.floor(Math.random() * 600); // below 32768: see serverPorts
    try {
      return await Cluster.up({ dataDir, fleetDir, workers, portBase, shards: 4 });
    } catch (error) {
      if (attempt < 5 && error instanceof ClusterError && /is in use/.test(error.problem)) continue;
      throw error;
    }
  }
}

/** Builds a release of the fault harness's app whose every start appends a line to evidence/<node>.starts. */
/** A ledger that says why it is not there, rather than migrating the store behind a test's back. */
function unopened(): LedgerStore {
  const refuse = () => Promise.reject(new Error('this production stack was started with { ledger: false }'));
  return {
    append: refuse,
    list: refuse,
    nodes: refuse,
    operatorDecisions: refuse,
    close: () => Promise.resolve(),
    backend: 'postgres',
    location: '(not opened)',
  } as unknown as LedgerStore;
}

export async function artifactFor(
  stack: ProductionStack,
  node: string,
  version: string,
): Promise<{ file: string; sha256: string }> {
  const { buildArtifact } = await import('../../scripts/build-artifact.mjs');
  const source = path.join(stack.evidenceDir, `src-${node}-${version}`);
  await fs.mkdir(source, { recursive: true });
  const app = await fs.readFile(path.join(__dirname, '..', '..', 'faults', 'app', 'server.js'), 'utf8');
  await fs.writeFile(path.join(source, 'server.js'), app.replace('__START_LOG__', startLog(stack, node)));
  const staging = path.join(stack.evidenceDir, `out-${node}-${version}`);
  const out = await buildArtifact({ version, outDir: staging, sourceDir: source });
  const file = path.join(stack.fleetDir, 'artifacts', `app-${version}-${node}.tgz`);
  await fs.rename(out.file, file);
  return { file: `artifacts/${path.basename(file)}`, sha256: out.sha256 };
}

export const startLog = (stack: ProductionStack, node: string) => path.join(stack.evidenceDir, `${node}.starts`);

/** How many times the node's app started, as the app itself counted. */
export function startsOf(stack: ProductionStack, node: string): number {
  const file = startLog(stack, node);
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0;
}

export interface NodeSpec {
  version: string;
  workers?: number;
  maintenance?: boolean;
  policy?: Record<string, unknown>;
  /** More managed files, by resource key: a path under the node's root and its content. */
  files?: Record<string, { path: string; content: string }>;
}

export async function writeNode(stack: ProductionStack, node: string, generation: number, spec: NodeSpec): Promise<string> {
  const art = await artifactFor(stack, node, spec.version);
  const doc = {
    node,
    generation,
    resources: {
      build: { type: 'release', version: spec.version, artifact: art.file, sha256: art.sha256 },
      config: { type: 'file', path: 'etc/app/config.json', content: { workers: spec.workers ?? 8 } },
      app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
      maintenance: { type: 'flag', value: spec.maintenance ?? false },
      ...Object.fromEntries(Object.entries(spec.files ?? {}).map(([key, f]) => [key, { type: 'file', ...f }])),
    },
    policy: { ...FAST_POLICY, node_timeout: '20s', ...spec.policy },
  };
  await writeAtomic(path.join(stack.fleetDir, 'desired', 'nodes', `${node}.yaml`), stringify(doc));
  const read = await new DesiredStateAuthority(stack.fleetDir).read(node);
  if (!read.ok) throw new Error(read.error);
  return read.intent.digest;
}

export async function writeAgentFile(stack: ProductionStack, node: string, extra: Record<string, unknown> = {}): Promise<string> {
  const file = path.join(stack.fleetDir, 'agents', `${node}.yaml`);
  const root = path.join(stack.fleetDir, 'nodes', node);
  await fs.mkdir(root, { recursive: true });
  await writeAtomic(file, stringify({ node, root, reconciliation: { mode: 'enforce' }, ...extra }));
  return file;
}

export const rootOf = (stack: ProductionStack, node: string) => path.join(stack.fleetDir, 'nodes', node);

async function writeAtomic(file: string, text: string): Promise<void> {
  await fs.writeFile(`${file}.tmp`, text);
  await fs.rename(`${file}.tmp`, file);
}

/** Polls a loop's state and ledger queries until `predicate` holds; through server restarts, it keeps asking. */
export async function waitFor(
  handle: WorkflowHandle,
  predicate: (s: NodeState, ledger: LedgerEntry[]) => boolean,
  timeoutMs = 120_000,
): Promise<NodeState> {
  const { state } = await until(
    async () => {
      // Both queries settle before the next try: a query still retrying in the background when the
      // stack closes its connection would throw from the client's retry timer, outside any test.
      const [state, ledger] = await Promise.allSettled([handle.query(stateQuery), handle.query(ledgerQuery)]);
      if (state.status === 'rejected') throw state.reason;
      if (ledger.status === 'rejected') throw ledger.reason;
      return { state: state.value, ledger: ledger.value };
    },
    {
      what: `${handle.workflowId}'s state`,
      accept: ({ state, ledger }) => predicate(state, ledger),
      errors: 'retry',
      timeoutMs,
      intervalMs: 500,
    },
  );
  return state;
}

/** The store's entries for a node, and the applied actions among them as "generation:resource:action". */
export async function appliedActions(stack: ProductionStack, node: string): Promise<string[]> {
  const entries = await stack.ledger.list(node);
  return entries.flatMap((e) =>
    e.execution_evidence
      .filter((x) => x.outcome === 'applied')
      .map((x) => `${e.desired_generation}:${x.resource_key}:${x.action}`),
  );
}

/**
 * Nothing lost: every entry the loop's own ledger query holds is in the PostgreSQL store with the
 * same decision, and the store's sequence per loop has no gap.
 */
export async function missingFromStore(stack: ProductionStack, handle: WorkflowHandle, node: string): Promise<string[]> {
  const inWorkflow = await handle.query(ledgerQuery).catch(async (error: unknown) => {
    // A query replays the loop when no worker holds it: keep its history so the failure can be replayed.
    // Binary (temporal.api.history.v1.History), for Worker.runReplayHistory after History.decode.
    const file = path.join(__dirname, '..', '..', 'test-artifacts', `failed-query-${handle.workflowId.replace(/\//g, '_')}.pb`);
    const history = await handle.fetchHistory().catch(() => null);
    if (history) {
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.writeFile(file, temporal.api.history.v1.History.encode(history).finish());
    }
    throw new Error(`${String(error)} (the loop's history: ${history ? file : 'not readable'})`, { cause: error });
  });
  const stored = (await stack.ledger.list(node)).filter((e) => e.workflow_id === handle.workflowId);
  const key = (e: LedgerEntry) => `${e.seq}:${e.convergence_status}:${e.reason}`;
  const have = new Set(stored.map(key));
  const missing = inWorkflow.filter((e) => !have.has(key(e))).map((e) => `${handle.workflowId} #${key(e)} not in the store`);
  const seqs = stored.map((e) => e.seq).sort((a, b) => a - b);
  seqs.forEach((s, i) => {
    if (i > 0 && s !== seqs[i - 1] + 1) missing.push(`${handle.workflowId}: the store's seq jumps from ${seqs[i - 1]} to ${s}`);
  });
  return missing;
}
