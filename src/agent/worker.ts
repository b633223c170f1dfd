import path from 'node:path';
import { Runtime, Worker, type NativeConnection } from '@temporalio/worker';
import { connectConfig, connectWorker } from '../worker/connection';
import { codecDataConverter } from '../codec';
import { agentTaskQueue } from '../contract';
import { createAgentActivities } from './activities';
import { loadAgentConfig } from './config';
import { tracingWorkerOptions } from '../tracing';
import { checkServiceBackend } from './services/systemd';
import { endOrphanedWatches } from './node/watch-tokens';
import { RootRefused, takeRoot } from './node/root-lease';
import { makeDirs, realRoot, type RegisterReads } from './fs';
import type { AgentConfig } from '../schemas';

/*
 * `datum agent`: one activities-only Temporal worker per agent.yaml. Several virtual nodes may
 * share a process (the dev stack runs one per fleet/agents/*.yaml); each keeps its own task
 * queue datum-node-<node>, root and agent.yaml, and all share one connection.
 */

/** Activity slots per node: a watch, an observe or apply, and room for a superseded generation's. */
const NODE_ACTIVITY_SLOTS = 8;
/**
 * Long polls per node's task queue. One is enough: a poll returns as soon as a task comes and
 * the next starts at once, and a running watch holds a slot, not the poll. The server sees one
 * poll per node, so its concurrent-poll limit bounds how many nodes it can serve. SDK 1.24 sizes
 * its pollers by `activityTaskPollerBehavior` alone (`maxConcurrentActivityTaskPolls` leaves
 * them at min(10, slots)).
 */
const NODE_ACTIVITY_POLLS = 1;
/**
 * The SDK sends an activity's beats at most every 0.8 × its heartbeatTimeout, and never further
 * apart than this. The watch's timeout is five minutes (src/workflows/agents.ts), so its beats
 * come every four: each beat is a server write (and billed by Temporal Cloud), and a watch only
 * needs them to say it is still there; an agent that died is announced by the next one
 * (watch-tokens.ts). Observe and apply (30 s timeouts) still beat every 24 s. Every activity
 * sets a heartbeatTimeout, so defaultHeartbeatThrottleInterval (for those without) is left as is.
 */
const MAX_HEARTBEAT_THROTTLE = '4m';

export interface RunAgentsOptions {
  configPaths: string[];
  /** An existing connection (not closed by shutdown). Otherwise one is opened from envconfig. */
  connection?: NativeConnection;
  /** Overrides the envconfig / TEMPORAL_ADDRESS address (default localhost:7233). */
  address?: string;
  /** Overrides the envconfig / TEMPORAL_NAMESPACE namespace (default "default"). */
  namespace?: string;
}

export interface RunningAgents {
  /** The node served by each agent.yaml, in the order given. */
  nodes: string[];
  /** Stops every worker (in-flight activities finish first) and closes a connection it opened. */
  shutdown(): Promise<void>;
  /** Settles when every worker has stopped; rejects if one failed (the others are stopped too). */
  done: Promise<void>;
}

/**
 * Every agent.yaml, read before anything starts: an agent whose trust settings are unreadable
 * must not start serving work, and no two may serve one node or share one root.
 */
async function loadDistinctConfigs(configPaths: string[]): Promise<Array<{ file: string; config: AgentConfig }>> {
  if (configPaths.length === 0) throw new Error('datum agent needs at least one agent.yaml (--config PATH)');
  const configs: Array<{ file: string; config: AgentConfig }> = [];
  for (const file of configPaths.map((p) => path.resolve(p))) {
    const config = await loadAgentConfig(file);
    await checkServiceBackend(file, config);
    configs.push({ file, config });
  }
  for (const key of ['node', 'root'] as const) {
    const seen = new Map<string, string>();
    for (const { file, config } of configs) {
      const other = seen.get(config[key]);
      if (other) throw new Error(`${file} and ${other} both declare ${key} ${config[key]}; every agent needs its own ${key}`);
      seen.set(config[key], file);
    }
  }
  return configs;
}

/**
 * Ends the watches a previous agent process on these roots left running, before this one takes
 * any work: their loops start new ones at once. A failure is logged, not fatal: those loops
 * then wait out the watch's heartbeat timeout, as they would without the announcement.
 */
async function announce(
  configs: Array<{ config: AgentConfig }>,
  connection: NativeConnection,
  namespace: string,
  dataConverter: ReturnType<typeof codecDataConverter>,
): Promise<void> {
  const logger = Runtime.instance().logger;
  for (const { config } of configs) {
    try {
      for (const end of await endOrphanedWatches(config.node, config.root, connection, namespace, dataConverter))
        logger.info(`agent started: ended a watch its previous process left running (${end.outcome})`, {
          node: config.node,
          workflow_id: end.workflow_id,
        });
    } catch (err) {
      logger.warn('agent started: could not end the watches its previous process left running', {
        node: config.node,
        error: (err as Error).message,
      });
    }
  }
}

/**
 * Takes each root this process serves (src/agent/node/root-lease.ts): a kernel lock on the root
 * and an entry in the host's register, so a second agent, an agent of a nested root (whichever
 * process serves it) or a `datum agent reset-fence` in progress is refused, and nothing blocks
 * the next start once this process dies. Nothing is served unless every root is taken.
 */
async function takeRoots(configs: Array<{ file: string; config: AgentConfig }>): Promise<Array<() => Promise<void>>> {
  const releases: Array<() => Promise<void>> = [];
  // What other processes registered, read once for all of this process's roots.
  const reads: RegisterReads = new Map();
  try {
    for (const { file, config } of configs) {
      const root = await realRoot(config.root, true);
      const lease = await takeRoot(root, config.node, file, reads).catch((err: unknown) => {
        throw err instanceof RootRefused ? new Error(`${file}: ${err.message}`) : err;
      });
      releases.push(() => lease.release());
    }
    return releases;
  } catch (err) {
    for (const release of releases) await release().catch(() => undefined);
    throw err;
  }
}

/**
 * A node's worker's tuning, apart from what it runs. A node's loop runs one watch and one observe
 * or apply at a time. The SDK's defaults (100 slots, 10 long polls per worker) would have an agent
 * serving 1000 virtual nodes hold 10,000 polls open on the server for work that rarely comes. The
 * bench's shaped ceiling (bench/ceiling-agent.js) serves its no-op nodes with the same.
 */
export function nodeWorkerTuning() {
  return {
    maxConcurrentActivityTaskExecutions: NODE_ACTIVITY_SLOTS,
    activityTaskPollerBehavior: { type: 'simple-maximum', maximum: NODE_ACTIVITY_POLLS },
    maxHeartbeatThrottleInterval: MAX_HEARTBEAT_THROTTLE,
  } as const;
}

export async function runAgents(options: RunAgentsOptions): Promise<RunningAgents> {
  const configs = await loadDistinctConfigs(options.configPaths);
  for (const { config } of configs) await makeDirs(config.root);
  const releases = await takeRoots(configs);
  const release = async () => {
    for (const r of releases) await r().catch(() => undefined);
  };

  try {
    return await serve(configs, options, release);
  } catch (err) {
    await release();
    throw err;
  }
}

async function serve(
  configs: Array<{ file: string; config: AgentConfig }>,
  options: RunAgentsOptions,
  release: () => Promise<void>,
): Promise<RunningAgents> {
  // Read before connecting: an unusable keyring stops the agent before it serves anything.
  const dataConverter = codecDataConverter();
  const ownConnection = options.connection === undefined;
  const { connection, namespace } = options.connection
    ? { connection: options.connection, namespace: options.namespace ?? connectConfig({}).namespace }
    : await connectWorker({ address: options.address, namespace: options.namespace });

  await announce(configs, connection, namespace, dataConverter);
  // The node's observe, apply and watch spans, when this process traces (src/tracing).
  const tracing = tracingWorkerOptions();
  const workers: Worker[] = [];
  try {
    for (const { file, config } of configs) {
      workers.push(
        await Worker.create({
          connection,
          namespace,
          taskQueue: agentTaskQueue(config.node),
          activities: createAgentActivities(file),
          identity: `datum-agent/${config.node}@${process.pid}`,
          dataConverter,
          interceptors: { activity: tracing.activityInterceptors },
          ...nodeWorkerTuning(),
        }),
      );
    }
  } catch (err) {
    if (ownConnection) await connection.close();
    throw err;
  }

  const stopAll = () => {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  };
  const done = Promise.all(
    workers.map((w) =>
      w.run().catch((err: unknown) => {
        stopAll();
        throw err;
      }),
    ),
  )
    .then(() => undefined)
    .finally(async () => {
      await release();
      if (ownConnection) await connection.close();
    });
  // Observed by shutdown() or the caller; this keeps an early failure from being unhandled.
  done.catch(() => undefined);

  return {
    nodes: configs.map(({ config }) => config.node),
    shutdown: async () => {
      stopAll();
      await done;
    },
    done,
  };
}
