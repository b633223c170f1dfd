import { existsSync } from 'node:fs';
import path from 'node:path';
import { openLedgerStore } from '../../activities/ledger-store';
import { createControllerWorker } from '../../worker/controller';
import { connectClient, connectWorker } from '../../worker/connection';
import { CONTROL_TASK_QUEUE, withFix } from '../../contract';
import { installRuntime, METRICS_OPTIONS } from '../../worker/metrics';
import { CONNECTION_OPTIONS, UsageError, parse } from '../args';
import type { Command } from '../main';
import { untilSignal } from '../process';

export function fleetDirFrom(flag: string | undefined): string {
  const dir = flag ?? process.env.DATUM_FLEET;
  if (!dir) throw new UsageError(withFix('no fleet directory', 'pass --fleet DIR or set DATUM_FLEET'));
  const abs = path.resolve(dir);
  if (!existsSync(path.join(abs, 'desired', 'nodes'))) {
    throw new UsageError(
      withFix(
        `${abs} has no desired/nodes/`,
        'point --fleet at a fleet directory (desired/nodes/<node>.yaml, agents/, artifacts/)',
      ),
    );
  }
  return abs;
}

/** Datum's local state (the SQLite ledger, the dev server's database): --data, $DATUM_DATA, or ./.datum. */
export function dataDirFrom(flag: string | undefined): string {
  return path.resolve(flag ?? process.env.DATUM_DATA ?? '.datum');
}

/** The parse layer (fuzzed in test/fuzz/cli.test.ts). */
export const workerArgs = (argv: string[]) =>
  parse(argv, {
    fleet: { type: 'string' },
    data: { type: 'string' },
    'task-queue': { type: 'string' },
    ...CONNECTION_OPTIONS,
    ...METRICS_OPTIONS,
  });

export const workerCommand: Command = {
  summary: 'run the controller worker (reconcileNode, rollout) on datum-control',
  usage: `usage: datum worker [--fleet DIR] [--data DIR] [--address HOST:PORT] [--namespace NS] [--task-queue Q] [--metrics-address IP:PORT]

Runs the controller worker on task queue ${CONTROL_TASK_QUEUE}. The authority is DIR/desired
(default: $DATUM_FLEET). Run as many as you like: they share the task queue. --task-queue runs
a separate controller (a staging copy of the authority, say); workflows started on that queue
use it, and the agents fence whatever generation it holds. Decisions are appended to the ledger
at $DATUM_LEDGER_URL (postgres://…) or else DIR/ledger.sqlite (--data, $DATUM_DATA, ./.datum).
--metrics-address (or $DATUM_METRICS_ADDRESS) serves Prometheus metrics, e.g. 127.0.0.1:9464.`,
  async run(argv) {
    const { values } = workerArgs(argv);
    const taskQueue = values['task-queue'] ?? CONTROL_TASK_QUEUE;
    const metrics = installRuntime({ metricsAddress: values['metrics-address'] });
    const fleetDir = fleetDirFrom(values.fleet);
    const target = { address: values.address, namespace: values.namespace };
    const [{ connection, namespace, address }, { client, connection: clientConnection }] = await Promise.all([
      connectWorker(target),
      connectClient(target),
    ]);
    const ledger = await openLedgerStore({ dataDir: dataDirFrom(values.data) });
    const worker = await createControllerWorker({ connection, client, namespace, fleetDir, taskQueue, ledger });
    process.stdout.write(
      `datum worker: task queue ${taskQueue} on ${address} (namespace ${namespace}), authority ${path.join(fleetDir, 'desired')}, ledger ${ledger.location}${metrics.metricsUrl ? `, metrics ${metrics.metricsUrl}` : ''}\n`,
    );
    const running = worker.run();
    await Promise.race([untilSignal(() => worker.shutdown()), running]);
    await running;
    await Promise.all([connection.close(), clientConnection.close(), ledger.close()]);
    return 0;
  },
};
