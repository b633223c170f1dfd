import path from 'node:path';
import { CONTROL_TASK_QUEUE, FLEET_INTERVAL_DEFAULT, withFix } from '../../contract';
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

export const workerCommand: CommandModule<WorkerRaw, WorkerInput> = {
  input(values) {
    return {
      values,
      fleetDir: fleetDirFrom(values.fleet),
      dataDir: dataDirFrom(values.data),
      taskQueue: values.taskQueue ?? CONTROL_TASK_QUEUE,
      maxCachedWorkflows: cacheSize(values.maxCachedWorkflows),
      fleetInterval: fleetIntervalOf(process.env.DATUM_FLEET_INTERVAL),
    };
  },
  // One function on purpose (62 lines): the worker's start is an ordered sequence (runtime and
  // tracing before any connection, the ledger before the worker, the fleet's watch after it
  // runs) whose shutdown closes the same handles in reverse; stages split out would pass all of
  // them around. It is the next to cut if it grows.
  async run({ values, fleetDir, dataDir, taskQueue, maxCachedWorkflows, fleetInterval }) {
    // The worker side of the SDK, loaded only by the commands that run one.
    const [
      { openLedgerStore },
      { createControllerWorker },
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
    const worker = await createControllerWorker({
      connection,
      client,
      namespace,
      fleetDir,
      taskQueue,
      ledger,
      maxCachedWorkflows,
      loopCacheLog: metrics.logger,
    });
    process.stdout.write(
      `datum worker: task queue ${taskQueue} on ${address} (namespace ${namespace}), authority ${path.join(fleetDir, 'desired')}, ledger ${ledger.location}, caches ${worker.options.maxCachedWorkflows} loops${maxCachedWorkflows ? '' : ' (as many as fit its heap)'}${metrics.metricsUrl ? `, metrics ${metrics.metricsUrl}` : ''}\n`,
    );
    // Fleet-wide counts from visibility, served with the worker's metrics.
    const authority = new DesiredStateAuthority(fleetDir);
    const fleet = metrics.metricsUrl ? startFleetMetrics(client, () => authority.nodes()) : null;
    const running = worker.run();
    // The fleet's own view (src/workflows/fleet.ts) runs on datum-control; a separate controller does not start one.
    const watch =
      taskQueue === CONTROL_TASK_QUEUE
        ? keepFleetWatched(client, { interval: fleetInterval, log: (m) => metrics.logger.warn(m) })
        : null;
    await Promise.race([untilSignal(() => worker.shutdown()), running]);
    await running;
    watch?.stop();
    fleet?.stop();
    await Promise.all([connection.close(), clientConnection.close(), ledger.close(), stopTracing()]);
    return 0;
  },
};
