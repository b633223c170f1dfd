// `npm run cluster -- up|down|status|build`: the production-shaped local cluster (cluster.ts).

import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { codecDataConverter } from '../codec';
import { DesiredStateAuthority } from '../activities/authority';
import { CONTROL_TASK_QUEUE, WORKFLOW_TYPES, outcomeWords, rolloutWorkflowId, withFix, type RolloutWorkflow } from '../contract';
import { ensureServerBinaries } from './binaries';
import { Cluster, type UpResult } from './cluster';
import { ENV_FILE } from './state';
import { ClusterError } from './errors';

const USAGE = `usage: npm run cluster -- <up|down|status|build> [options]

  up      as \`docker compose up -d\`: starts what is missing or dead and leaves what runs, then
          says which it did for each part. PostgreSQL; the pinned Temporal server on it (schema,
          dynamic config and search attributes by the scripts docker-compose.yml runs); --workers
          \`datum worker\` processes with the ledger in PostgreSQL; one agent per FLEET/agents/*.yaml;
          and, when nothing ran before, a first rollout. Returns once everything serves; the
          processes keep running. A dead part comes back alone: what runs (agents, their services)
          is left alone.
  down    stops every process \`up\` started (agents, their services, workers, server, PostgreSQL)
  status  what runs, with pids and logs (exit 1 when a part is STOPPED)
  build   builds (once per machine) and verifies the Temporal server binaries

options:
  --data DIR        state: databases, logs, fleet copy, node roots (default ./.datum/cluster)
  --port-base N     the frontend's gRPC port; the server's other ports are N+1…N+9, PostgreSQL
                    N+10 (default: the cluster's own, else 7233; at most 32757: Temporal keeps
                    ports in a smallint)
  --workers N       controller worker processes (default 1; up starts missing ones, stops none)
  --fleet DIR       a fleet directory instead of the bundled demo fleet
  --shards N        history shards, fixed at the first up (default 16; compose uses 128)
  --no-rollout      do not start the first rollout
  --force           (build) rebuild even when a verified build exists`;

const say = (line: string) => process.stdout.write(`cluster: ${line}\n`);

function options(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      data: { type: 'string' },
      'port-base': { type: 'string' },
      workers: { type: 'string' },
      fleet: { type: 'string' },
      shards: { type: 'string' },
      'no-rollout': { type: 'boolean' },
      force: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const whole = (name: string, given: string | undefined, example: number, min: number, max: number) => {
    if (given === undefined) return undefined;
    const n = Number(given);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new ClusterError(
        `--${name} ${given} is not a whole number from ${min} to ${max}`,
        `pass one, such as --${name} ${example}`,
      );
    return n;
  };
  return {
    command: positionals[0],
    help: values.help === true,
    dataDir: path.resolve(values.data ?? process.env.DATUM_CLUSTER_DATA ?? path.join('.datum', 'cluster')),
    // Temporal stores membership ports as a PostgreSQL smallint: every port must stay below 32768.
    portBase: whole('port-base', values['port-base'], 7233, 1024, 32_757),
    workers: whole('workers', values.workers, 1, 1, 16),
    shards: whole('shards', values.shards, 16, 1, 16_384),
    fleetDir: values.fleet,
    rollout: values['no-rollout'] !== true,
    force: values.force === true,
  };
}

export async function main(argv: string[]): Promise<number> {
  let o: ReturnType<typeof options>;
  try {
    o = options(argv);
  } catch (error) {
    process.stderr.write(`cluster: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (o.help || !o.command) {
    (o.help ? process.stdout : process.stderr).write(`${USAGE}\n`);
    return o.help ? 0 : 2;
  }
  try {
    return await run(o);
  } catch (error) {
    process.stderr.write(`cluster ${o.command}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

async function run(o: ReturnType<typeof options>): Promise<number> {
  switch (o.command) {
    case 'build': {
      const bins = await ensureServerBinaries({ log: say, rebuild: o.force });
      say(`Temporal server ${bins.version}: ${bins.server} and ${bins.sqlTool} verified`);
      return 0;
    }
    case 'up':
      return await up(o);
    case 'down':
      return await down(o.dataDir);
    case 'status':
      return await status(o.dataDir);
    default:
      process.stderr.write(`cluster: unknown command "${o.command}" — fix: use up, down, status or build\n\n${USAGE}\n`);
      return 2;
  }
}

async function up(o: ReturnType<typeof options>): Promise<number> {
  const cluster = await Cluster.up({
    dataDir: o.dataDir,
    portBase: o.portBase,
    workers: o.workers,
    fleetDir: o.fleetDir,
    shards: o.shards,
    log: say,
  });
  for (const r of cluster.upResults) say(`${r.name.padEnd(18)} ${upLine(r)}`);
  say(`serving on ${cluster.address}, PostgreSQL on 127.0.0.1:${cluster.pg.port}`);
  if (o.rollout && cluster.upResults.every((r) => r.did !== 'running')) await firstRollout(cluster);
  const data = o.dataDir === path.resolve('.datum/cluster') ? '' : ` --data ${o.dataDir}`;
  // The ledger URL holds the datum role's password: the banner names the 0600 file that has it.
  process.stdout.write(`
The cluster is up. Logs: ${path.join(cluster.dataDir, 'logs')}
  set -a; . ${path.join(cluster.dataDir, ENV_FILE)}; set +a     # its address, fleet and ledger URL (mode 0600)
  npx datum status
  npx datum describe N-24
  npx datum ledger N-24
  temporal workflow list --address ${cluster.address}
  npm run cluster -- status${data}
  npm run cluster -- down${data}      # stops everything above
`);
  return 0;
}

function upLine(r: UpResult): string {
  if (r.did === 'running') return `running    pid ${r.pid} (left as it was)`;
  if (r.did === 'started') return `started    pid ${r.pid}`;
  return `restarted  pid ${r.pid} (pid ${r.was} had stopped)`;
}

/** One rollout per desired generation in the fleet (attaching to one already started). */
async function firstRollout(cluster: Cluster): Promise<void> {
  const authority = new DesiredStateAuthority(cluster.fleetDir);
  const byGeneration = new Map<number, string[]>();
  for (const node of await authority.nodes()) {
    const read = await authority.read(node);
    if (read.ok) byGeneration.set(read.intent.generation, [...(byGeneration.get(read.intent.generation) ?? []), node]);
    else say(`${node}: not rolled out: ${read.error}`);
  }
  const connection = await Connection.connect({ address: cluster.address });
  try {
    const client = new Client({ connection, namespace: cluster.namespace, dataConverter: codecDataConverter() });
    for (const [generation, nodes] of byGeneration) {
      const handle = await client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
        taskQueue: CONTROL_TASK_QUEUE,
        workflowId: rolloutWorkflowId(generation, nodes),
        args: [{ generation, nodes }],
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      const result = await handle.result();
      for (const n of result.nodes)
        say(`generation ${generation}, ${n.node}: ${'status' in n ? `${n.status} (${n.reason})` : outcomeWords(n).detail}`);
    }
  } finally {
    await connection.close();
  }
}

async function down(dataDir: string): Promise<number> {
  const cluster = await Cluster.attach(dataDir, say);
  if (!cluster) {
    say(`no cluster recorded in ${dataDir} (${path.join(dataDir, 'cluster.json')}): nothing to stop`);
    return 0;
  }
  for (const line of await cluster.down()) say(line);
  say('down: nothing it started is running');
  return 0;
}

async function status(dataDir: string): Promise<number> {
  const cluster = await Cluster.attach(dataDir);
  if (!cluster) {
    say(withFix(`no cluster recorded in ${dataDir}`, '`npm run cluster -- up` starts one'));
    return 3;
  }
  const rows = cluster.status();
  if (rows.every((p) => !p.running) && cluster.processes.length === 0) {
    say(withFix(`the cluster in ${dataDir} is down: nothing runs`, '`npm run cluster -- up` starts it again on its data'));
    return 3;
  }
  for (const p of rows) say(`${p.name.padEnd(18)} ${p.running ? 'running' : 'STOPPED'}  pid ${p.pid}  ${p.log}`);
  return rows.every((p) => p.running) ? 0 : 1;
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
