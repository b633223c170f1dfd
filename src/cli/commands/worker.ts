import path from 'node:path';
import type { Worker } from '@temporalio/worker';
import { CONTROL_TASK_QUEUE, FLEET_INTERVAL_DEFAULT, MAX_LOOP_SHARDS, withFix } from '../../contract';
import { parseDuration } from '../../domain/duration';
import { UsageError } from '../errors';
import { publishBuildInfo } from '../build-info';
import { applyConnectionFlags, type ConnectionFlags } from '../connection';
import { dataDirFrom, fleetDirFrom } from '../dirs';
import { datumVersion, type CommandModule } from '../command';
import { pinoLog, startTracing, stopTracing } from '../../tracing';
import { untilSignal } from '../process';

interface WorkerRaw extends ConnectionFlags {
  fleet?: string;
  data?: string;
  taskQueue?: string;
  loopShards?: string;
  serveShards?: string;
  maxCachedWorkflows?: string;
  metricsAddress?: string;
  logLevel?: string;
  logFormat?: string;
}

export interface WorkerInput {
  values: WorkerRaw;
  fleetDir: string;
  dataDir: string;
  taskQueue: string;
  /** How many shards the fleet's loops run in (loopTaskQueue), and which of them this worker serves. */
  loopShards: number;
  serveShards: number[];
  maxCachedWorkflows: number | undefined;
  /** How often the fleet workflow this worker starts looks (DATUM_FLEET_INTERVAL). */
  fleetInterval: string;
}

/** DATUM_FLEET_INTERVAL: a duration of 1s or more, default 60s. */
function fleetIntervalOf(raw: string | undefined): string {
  if (raw === undefined || raw.trim() === '') return FLEET_INTERVAL_DEFAULT;
  const ms = parseDuration(raw.trim());
  if (ms === null || ms < 1000)
    throw new UsageError(
      withFix(`DATUM_FLEET_INTERVAL is "${raw}", not a duration of 1s or more`, 'set it like 60s or 5m, or unset it (60s)'),
    );
  return raw.trim();
}

/** --max-cached-workflows / DATUM_MAX_CACHED_WORKFLOWS: a whole number of loops, 1 or more. */
function cacheSize(raw: string | undefined): number | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const n = Number(raw.trim());
  if (!Number.isInteger(n) || n < 1) {
    throw new UsageError(
      withFix(
        `--max-cached-workflows (or DATUM_MAX_CACHED_WORKFLOWS) is "${raw}", not a whole number of 1 or more`,
        'give how many loops this worker keeps in memory, such as 1200, or leave it unset for as many as fit its heap',
      ),
    );
  }
  return n;
}

/** --loop-shards / DATUM_LOOP_SHARDS: a whole number from 1 to MAX_LOOP_SHARDS, default 1. */
function loopShardsOf(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === '') return 1;
  const n = Number(raw.trim());
  if (!Number.isInteger(n) || n < 1 || n > MAX_LOOP_SHARDS) {
    throw new UsageError(
      withFix(
        `--loop-shards (or DATUM_LOOP_SHARDS) is "${raw}", not a whole number from 1 to ${MAX_LOOP_SHARDS}`,
        'give every controller worker of the fleet the same number of shards, such as 4, or leave it unset for one (datum-control)',
      ),
    );
  }
  return n;
}

/** --serve-shards / DATUM_SERVE_SHARDS: shards and ranges (0,2 or 0-3), each below the shard count; default all. */
function serveShardsOf(raw: string | undefined, shards: number): number[] {
  if (shards === 1) {
    if (raw !== undefined && raw.trim() !== '' && raw.trim() !== '0')
      throw new UsageError(
        withFix(
          `--serve-shards (or DATUM_SERVE_SHARDS) is "${raw}", but the loops run in one shard (datum-control)`,
          "give --loop-shards (DATUM_LOOP_SHARDS) the fleet's shard count first, or leave --serve-shards unset",
        ),
      );
    return [];
  }
  if (raw === undefined || raw.trim() === '') return [...Array(shards).keys()];
  const served = new Set<number>();
  for (const part of raw.split(',').map((p) => p.trim())) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    const [from, to] = m ? [Number(m[1]), Number(m[2] ?? m[1])] : [NaN, NaN];
    if (!m || from > to || to >= shards) {
      throw new UsageError(
        withFix(
          `--serve-shards (or DATUM_SERVE_SHARDS) has "${part}", not a shard or a range of shards from 0 to ${shards - 1}`,
          `list shards below --loop-shards ${shards}, such as 0,2 or 0-${shards - 1}, or leave it unset to serve them all`,
        ),
      );
    }
    for (let k = from; k <= to; k++) served.add(k);
  }
  return [...served].sort((a, b) => a - b);
}

/** What the start line says of the loop shards this worker serves (nothing with one shard). */
function shardsServed(loopShards: number, shardWorkers: Worker[]): string {
  if (loopShards === 1) return '';
  const each = shardWorkers[0]?.options.maxCachedWorkflows ?? 0;
  return `; loops in ${loopShards} shards, serving ${shardWorkers.map((w) => w.options.taskQueue).join(', ')} (each caches ${each} loops)`;
}

/** Runs the workers together: one stopping (a signal, or a fatal error) stops them all, so no controller is left half served. */
function runAll(workers: Worker[]): { running: Promise<void>; stopAll: () => void } {
  const stopAll = () => {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  };
  const running = Promise.allSettled(workers.map((w) => w.run().finally(stopAll))).then((ran) => {
    const failed = ran.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  });
  return { running, stopAll };
}

export const workerCommand: CommandModule<WorkerRaw, WorkerInput> = {
  input(values) {
    const loopShards = loopShardsOf(values.loopShards);
    return {
      values,
      fleetDir: fleetDirFrom(values.fleet),
      dataDir: dataDirFrom(values.data),
      taskQueue: values.taskQueue ?? CONTROL_TASK_QUEUE,
      loopShards,
      serveShards: serveShardsOf(values.serveShards, loopShards),
      maxCachedWorkflows: cacheSize(values.maxCachedWorkflows),
      fleetInterval: fleetIntervalOf(process.env.DATUM_FLEET_INTERVAL),
    };
  },
  // One function on purpose (64 lines): the worker's start is an ordered sequence (runtime and
  // tracing before any connection, the ledger before the worker, the fleet's watch after it
  // runs) whose shutdown closes the same handles in reverse; stages split out would pass all of
  // them around. It is the next to cut if it grows.
  async run({ values, fleetDir, dataDir, taskQueue, loopShards, serveShards, maxCachedWorkflows, fleetInterval }) {
    // The worker side of the SDK, loaded only by the commands that run one.
    const [
      { openLedgerStore },
      { createControllerWorkers },
      { connectClient, connectWorker },
      { installRuntime },
      { startFleetMetrics },
      { DesiredStateAuthority },
      { keepFleetWatched },
    ] = await Promise.all([
      import('../../activities/ledger-store.js'),
      import('../../worker/controller.js'),
      import('../../worker/connection.js'),
      import('../../worker/metrics.js'),
      import('../../worker/fleet-metrics.js'),
      import('../../activities/authority.js'),
      import('../../worker/fleet-watch.js'),
    ]);
    applyConnectionFlags(values);
    const metrics = installRuntime({
      metricsAddress: values.metricsAddress,
      component: 'worker',
      logLevel: values.logLevel,
      logFormat: values.logFormat,
      ownConsole: true,
    });
    publishBuildInfo(metrics.metricsUrl);
    // Before the client and the worker are made: both take its interceptors (OTEL_*; off by default).
    await startTracing({ component: 'worker', version: datumVersion(), log: pinoLog(metrics.logger) });
    // The flags' address and namespace (applyConnectionFlags put the rest into the environment).
    const [{ connection, namespace, address }, { client, connection: clientConnection }] = await Promise.all([
      connectWorker(values),
      connectClient(values),
    ]);
    const ledger = await openLedgerStore({ dataDir });
    const [worker, ...shardWorkers] = await createControllerWorkers({
      connection,
      client,
      namespace,
      fleetDir,
      taskQueue,
      loopShards,
      serveShards,
      ledger,
      maxCachedWorkflows,
      loopCacheLog: metrics.logger,
    });
    const warn = (m: string) => metrics.logger.warn(m);
    process.stdout.write(
      `datum worker: task queue ${taskQueue} on ${address} (namespace ${namespace}), authority ${path.join(fleetDir, 'desired')}, ledger ${ledger.location}, caches ${worker.options.maxCachedWorkflows} loops${maxCachedWorkflows ? '' : ' (as many as fit its heap)'}${metrics.metricsUrl ? `, metrics ${metrics.metricsUrl}` : ''}${shardsServed(loopShards, shardWorkers)}\n`,
    );

    // Fleet-wide counts from visibility, served with the worker's metrics.
    const authority = new DesiredStateAuthority(fleetDir);
    const fleet = metrics.metricsUrl ? startFleetMetrics(client, () => authority.nodes()) : null;
    const { running, stopAll } = runAll([worker, ...shardWorkers]);
    // The fleet's own view (src/workflows/fleet.ts) runs on datum-control; a separate controller does not start one.
    const watch = taskQueue === CONTROL_TASK_QUEUE ? keepFleetWatched(client, { interval: fleetInterval, log: warn }) : null;
    await Promise.race([untilSignal(stopAll), running]);
    await running;
    watch?.stop();
    fleet?.stop();
    await Promise.all([connection.close(), clientConnection.close(), ledger.close(), stopTracing()]);
    return 0;
  },
};
