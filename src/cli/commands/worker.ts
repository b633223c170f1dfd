import path from 'node:path';
import { CONTROL_TASK_QUEUE } from '../../contract';
import { publishBuildInfo } from '../build-info';
import { applyConnectionFlags, type ConnectionFlags } from '../connection';
import { dataDirFrom, fleetDirFrom } from '../dirs';
import { parseOnly } from '../main';
import { datumVersion, type CommandModule } from '../program';
import { pinoLog, startTracing, stopTracing } from '../../tracing';
import { untilSignal } from '../process';

interface WorkerRaw extends ConnectionFlags {
  fleet?: string;
  data?: string;
  taskQueue?: string;
  metricsAddress?: string;
  logLevel?: string;
  logFormat?: string;
}

export interface WorkerInput {
  values: WorkerRaw;
  fleetDir: string;
  dataDir: string;
  taskQueue: string;
}

/** The parse layer (fuzzed in test/fuzz/cli.test.ts). */
export const workerArgs = (argv: string[]) => parseOnly(['worker', ...argv]);

export const workerCommand: CommandModule<WorkerRaw, WorkerInput> = {
  input(values) {
    return {
      values,
      fleetDir: fleetDirFrom(values.fleet),
      dataDir: dataDirFrom(values.data),
      taskQueue: values.taskQueue ?? CONTROL_TASK_QUEUE,
    };
  },
  async run({ values, fleetDir, dataDir, taskQueue }) {
    // The worker side of the SDK, loaded only by the commands that run one.
    const [
      { openLedgerStore },
      { createControllerWorker },
      { connectClient, connectWorker },
      { installRuntime },
      { startFleetMetrics },
    ] = await Promise.all([
      import('../../activities/ledger-store.js'),
      import('../../worker/controller.js'),
      import('../../worker/connection.js'),
      import('../../worker/metrics.js'),
      import('../../worker/fleet-metrics.js'),
    ]);
    applyConnectionFlags(values);
    const metrics = installRuntime({
      metricsAddress: values.metricsAddress,
      component: 'worker',
      logLevel: values.logLevel,
      logFormat: values.logFormat,
    });
    publishBuildInfo(metrics.metricsUrl);
    // Before the client and the worker are made: both take its interceptors (OTEL_*; off by default).
    await startTracing({ component: 'worker', version: datumVersion(), log: pinoLog(metrics.logger) });
    const target = { address: values.address, namespace: values.namespace };
    const [{ connection, namespace, address }, { client, connection: clientConnection }] = await Promise.all([
      connectWorker(target),
      connectClient(target),
    ]);
    const ledger = await openLedgerStore({ dataDir });
    const worker = await createControllerWorker({ connection, client, namespace, fleetDir, taskQueue, ledger });
    process.stdout.write(
      `datum worker: task queue ${taskQueue} on ${address} (namespace ${namespace}), authority ${path.join(fleetDir, 'desired')}, ledger ${ledger.location}${metrics.metricsUrl ? `, metrics ${metrics.metricsUrl}` : ''}\n`,
    );
    // Fleet-wide counts from visibility, served with the worker's metrics.
    const fleet = metrics.metricsUrl ? startFleetMetrics(client) : null;
    const running = worker.run();
    await Promise.race([untilSignal(() => worker.shutdown()), running]);
    await running;
    fleet?.stop();
    await Promise.all([connection.close(), clientConnection.close(), ledger.close(), stopTracing()]);
    return 0;
  },
};
