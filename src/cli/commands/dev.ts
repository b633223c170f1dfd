import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, promises as fs, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { parse as parseYaml } from 'yaml';
import { DesiredStateAuthority } from '../../activities/authority';
import { listFleetAgents, type FleetAgentFile } from '../../agent/config';
import { stopServices } from '../../agent/services';
import { connectClient } from '../../worker/connection';
import { projectRoot, temporalCliPath } from '../../worker/paths';
import { devServerFlags } from '../../worker/dev-server';
import { prepareDemoFleet } from '../../worker/demo-fleet';
import {
  CONTROL_TASK_QUEUE,
  FLEET_WORKFLOW_ID,
  MEMO_LOOKED_AT,
  fleetLookSignal,
  outcomeWords,
  WORKFLOW_TYPES,
  rolloutWorkflowId,
  withFix,
  type RolloutWorkflow,
} from '../../contract';
import { UsageError } from '../args';
import type { CommandModule } from '../command';
import { print, table } from '../output';
import { untilSignal } from '../process';
import { dataDirFrom } from '../dirs';

interface DevRaw {
  fleet?: string;
  port: string;
  uiPort: string;
  data?: string;
}

export interface DevInput {
  values: DevRaw;
  port: number;
  uiPort: number;
}

export const devCommand: CommandModule<DevRaw, DevInput> = {
  input(values) {
    return { values, port: portOf(values.port, '--port'), uiPort: portOf(values.uiPort, '--ui-port') };
  },
  async run(raw) {
    const stack = await stackOptions(raw);
    const children = new Children(path.join(stack.dataDir, 'logs'));
    // Installed before anything starts, so Ctrl-C at any moment stops what was started.
    const signalled = untilSignal(
      () => undefined,
      () => {
        children.killAll();
        killNodeServicesNow(stack.agents);
      },
    ).then(() => 'signal' as const);
    try {
      print(`datum dev: data in ${stack.dataDir}, fleet ${stack.fleetDir}`);
      children.start('temporal', temporalCliPath(), devServerArgs(stack));
      const started = await Promise.race([waitForServer(stack.address, children), signalled]);
      if (started === 'signal') return 130;
      try {
        return await runStack(stack, children, started.client, signalled);
      } finally {
        await started.connection.close();
      }
    } finally {
      print('datum dev: stopping…');
      await children.stop(['worker', ...stack.agents.map((a) => `agent-${a.node}`)]);
      await stopNodeServices(stack.agents);
      await children.stop(['temporal']);
      print('datum dev: stopped; every process it started has exited. `npm start` again resumes from the same data.');
    }
  },
};

interface Stack {
  port: number;
  uiPort: number;
  address: string;
  dataDir: string;
  fleetDir: string;
  /** The fleet is the bundled demo (no --fleet). */
  demo: boolean;
  agents: FleetAgentFile[];
}

async function stackOptions({ values, port, uiPort }: DevInput): Promise<Stack> {
  const dataDir = dataDirFrom(values.data);
  await fs.mkdir(path.join(dataDir, 'logs'), { recursive: true });
  await Promise.all([ensureFree(port, '--port'), ensureFree(uiPort, '--ui-port')]);
  const fleetDir = values.fleet ? path.resolve(values.fleet) : await prepareDemoFleet(dataDir, 'datum dev');
  const agents = await listFleetAgents(fleetDir);
  if (agents.length === 0)
    throw new UsageError(
      withFix(`${fleetDir}/agents has no <node>.yaml`, 'add one agent.yaml per node the dev stack should run'),
    );
  return { port, uiPort, address: `127.0.0.1:${port}`, dataDir, fleetDir, demo: values.fleet === undefined, agents };
}

function devServerArgs(stack: Stack): string[] {
  return [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(stack.port),
    '--ui-port',
    String(stack.uiPort),
    '--db-filename',
    path.join(stack.dataDir, 'temporal.sqlite'),
    '--namespace',
    'default',
    '--log-level',
    'warn',
    ...devServerFlags(),
  ];
}

/** The controller, the agents and the first rollout; then it runs until Ctrl-C or a process exits. */
async function runStack(stack: Stack, children: Children, client: Client, signalled: Promise<'signal'>): Promise<number> {
  const datum = path.join(projectRoot(), 'bin', 'datum.js');
  children.start('worker', process.execPath, [
    datum,
    'worker',
    '--fleet',
    stack.fleetDir,
    '--data',
    stack.dataDir,
    '--address',
    stack.address,
  ]);
  for (const a of stack.agents)
    children.start(`agent-${a.node}`, process.execPath, [datum, 'agent', '--config', a.file, '--address', stack.address]);
  if ((await Promise.race([firstRollouts(client, stack.fleetDir, stack.dataDir, children), signalled])) === 'signal') return 130;
  await freshLook(client);
  printNextSteps(stack.uiPort, stack.port, stack.dataDir, stack.fleetDir, stack.demo);
  const outcome = await Promise.race([signalled, children.firstExit()]);
  if (outcome === 'signal') return 0;
  process.stderr.write(`datum dev: ${outcome} stopped unexpectedly (log: ${children.logOf(outcome)}); stopping the stack\n`);
  return 1;
}

function portOf(text: string, flag: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isInteger(n) || n < 1 || n > 65535)
    throw new UsageError(withFix(`${flag} ${JSON.stringify(text)} is not a port`, 'a number from 1 to 65535'));
  return n;
}

async function ensureFree(port: number, flag: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const server = net.createServer();
    server.once('error', () =>
      reject(
        new UsageError(withFix(`port ${port} is in use (another dev server?)`, `stop it, or pass ${flag} with a free port`)),
      ),
    );
    server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
  });
}

async function waitForServer(address: string, children: Children): Promise<Awaited<ReturnType<typeof connectClient>>> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (children.exited('temporal'))
      throw new Error(`the Temporal dev server exited during start-up — see ${children.logOf('temporal')}`);
    try {
      const c = await connectClient({ address });
      await c.connection.workflowService.getSystemInfo({});
      return c;
    } catch (error) {
      if (Date.now() > deadline)
        throw new Error(
          `the Temporal dev server did not answer on ${address} within 60 s (${(error as Error).message}) — see ${children.logOf('temporal')}`,
        );
      await new Promise((r) => setTimeout(r, 300));
    }
  }
}

/**
 * One rollout per desired generation in the fleet, on the first start only (a marker in the
 * data dir says it ran): a restart resumes the loops from the server's database instead.
 */
async function firstRollouts(client: Client, fleetDir: string, dataDir: string, children: Children): Promise<void> {
  const marker = path.join(dataDir, 'first-rollout.json');
  if (existsSync(marker)) {
    const ran = JSON.parse(await fs.readFile(marker, 'utf8')) as { at: string };
    print(`The first rollout ran at ${ran.at}; the reconcile loops resume from the server's database.`);
    return;
  }
  const authority = new DesiredStateAuthority(fleetDir);
  const byGeneration = new Map<number, string[]>();
  for (const node of await authority.nodes()) {
    const read = await authority.read(node);
    if (!read.ok) {
      print(`  ${node}: not rolled out: ${read.error}`);
      continue;
    }
    byGeneration.set(read.intent.generation, [...(byGeneration.get(read.intent.generation) ?? []), node]);
  }
  for (const [generation, nodes] of byGeneration) {
    const workflowId = rolloutWorkflowId(generation, nodes);
    print(`Rolling out generation ${generation} to ${nodes.join(', ')}…`);
    const handle = await client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId,
      args: [{ generation, nodes }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    const result = await Promise.race([
      handle.result(),
      children
        .firstExit()
        .then((name) => Promise.reject(new Error(`${name} stopped during the first rollout — see ${children.logOf(name)}`))),
    ]);
    print(
      table(
        ['NODE', 'STATUS', 'REASON'],
        result.nodes.map((n) => {
          const words = outcomeWords(n);
          return [n.node, words.status, words.detail];
        }),
      ),
    );
  }
  await fs.writeFile(marker, `${JSON.stringify({ at: new Date().toISOString(), generations: [...byGeneration.keys()] })}\n`);
}

/** How long `datum dev` waits for the fleet workflow's look after the first rollout. */
const FRESH_LOOK_WAIT_MS = 20_000;

/**
 * Asks the fleet workflow (started by the worker) to look now, and waits until it has, so that
 * `datum status` run from the next steps reads the loops the rollout just started, not a look
 * from before them (NO_RUNNING_LOOP for every node until the next look, a minute later). A
 * fleet workflow that does not answer in time is left to its own interval.
 */
async function freshLook(client: Client): Promise<void> {
  const handle = client.workflow.getHandle(FLEET_WORKFLOW_ID);
  const asked = Date.now();
  let signalled = false;
  while (Date.now() - asked < FRESH_LOOK_WAIT_MS) {
    signalled ||= await handle.signal(fleetLookSignal).then(
      () => true,
      () => false, // not started yet: the worker starts it
    );
    const looked = signalled
      ? await handle.describe().then(
          (d) => d.memo?.[MEMO_LOOKED_AT],
          () => null,
        )
      : null;
    if (typeof looked === 'string' && Date.parse(looked) >= asked) return;
    await new Promise((r) => setTimeout(r, 250));
  }
}

function printNextSteps(uiPort: number, port: number, dataDir: string, fleetDir: string, demo: boolean): void {
  const env = port === 7233 ? '' : `TEMPORAL_ADDRESS=127.0.0.1:${port} `;
  const data = dataDir === path.resolve('.datum') ? '' : ` --data ${dataDir}`;
  print(`
Datum is running. Web UI: http://127.0.0.1:${uiPort}/namespaces/default/workflows
Logs: ${path.join(dataDir, 'logs')}

Next, in another terminal:
  ${env}npx datum status                      # open conditions across the fleet (the worker's fleet workflow's view)
  ${env}npx datum describe N-24               # one node: decision, conditions, resources
  npx datum ledger N-24${data}                 # every decision recorded for N-24${
    demo
      ? `
  # The seed's worked example: N-24 to build 7.4 with config D7, maintenance left alone
  cp ${fleetDir}/next/N-24.yaml ${fleetDir}/desired/nodes/N-24.yaml
  ${env}npx datum rollout start --generation 12 --nodes N-24 --wait
  # N-25 is in observe mode: see its drift, then let Datum repair it
  ${env}npx datum describe N-25   # then set mode: enforce in ${fleetDir}/agents/N-25.yaml${reachSteps(env, dataDir, fleetDir)}`
      : ''
  }

Ctrl-C stops everything this command started.`);
}

/** What to try on the nodes that reach what a host already runs, where the demo has them. */
function reachSteps(env: string, dataDir: string, fleetDir: string): string {
  const has = (node: string) => existsSync(path.join(fleetDir, 'agents', `${node}.yaml`));
  const n26 = has('N-26')
    ? `
  # N-26: a package (in its own dpkg database), a directory with an owner and mode, a file's mode.
  # Changed by hand 30 s after Datum's last repair, it is drift Datum repairs; sooner, another writer (CONFLICT)
  dpkg --root=${path.join(dataDir, 'nodes', 'N-26.dpkg')} --log=/dev/null -i ${fleetDir}/artifacts/demo-motd_1.1-1_all.deb
  chmod 0777 ${path.join(dataDir, 'nodes', 'N-26', 'srv', 'reports')}
  ${env}npx datum import N-26 motd=package:demo-motd reports=directory:srv/reports   # desired state as the node is`
    : '';
  const n27 = has('N-27')
    ? `
  # N-27: a unit on your user manager, proven to run what Datum wrote
  systemctl --user status demo-ticker.service   # remove it with: systemctl --user disable --now demo-ticker.service`
    : `
  # N-27 (a systemd unit) is left out: \`systemctl --user\` did not answer when this demo fleet was made`;
  return `${n26}${n27}`;
}

/**
 * The root an agent.yaml names, read without validating the rest: on the way out, a file the
 * agent would refuse may still root services this stack started. Sync, for the second Ctrl-C.
 */
function agentRootOf(agent: FleetAgentFile): string | undefined {
  return (parseYaml(readFileSync(agent.file, 'utf8')) as { root?: string }).root;
}

/** The second Ctrl-C: no time for graceful stops, but the node services must not outlive us. */
function killNodeServicesNow(agents: FleetAgentFile[]): void {
  for (const pid of agents.flatMap(recordedServicePids)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

/** The pids the agent recorded for its node's services (synchronously: this runs on the way out). */
function recordedServicePids(agent: FleetAgentFile): number[] {
  try {
    const root = agentRootOf(agent);
    const dir = root ? path.join(root, '.datum', 'services') : null;
    if (!dir || !existsSync(dir)) return [];
    const states = readdirSync(dir).filter((x) => x.endsWith('.json'));
    return states.flatMap((s) => {
      const { pid } = JSON.parse(readFileSync(path.join(dir, s), 'utf8')) as { pid?: number };
      // Never pid 0 or 1: -1 and -0 would signal every process or our own group.
      return typeof pid === 'number' && Number.isInteger(pid) && pid > 1 ? [pid] : [];
    });
  } catch {
    return []; // Best effort on the way out.
  }
}

async function stopNodeServices(agents: FleetAgentFile[]): Promise<void> {
  for (const agent of agents) {
    try {
      const root = agentRootOf(agent);
      if (root) await stopServices(root);
    } catch {
      // An unreadable agent.yaml has no services we started.
    }
  }
}

/** The processes datum dev started: logs to files, stopped in order, never left behind. */
class Children {
  private readonly procs = new Map<string, ChildProcess>();
  private readonly exits = new Map<string, Promise<string>>();

  constructor(private readonly logDir: string) {}

  logOf(name: string): string {
    return path.join(this.logDir, `${name}.log`);
  }

  start(name: string, command: string, args: string[]): void {
    const log = createWriteStream(this.logOf(name), { flags: 'a' });
    // One metrics port cannot serve several processes: the children run without it.
    const { DATUM_METRICS_ADDRESS: _metrics, ...env } = process.env;
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    child.stdout.pipe(log);
    child.stderr.pipe(log);
    this.procs.set(name, child);
    this.exits.set(name, new Promise((resolve) => child.once('exit', () => resolve(name))));
  }

  exited(name: string): boolean {
    const c = this.procs.get(name);
    return !!c && c.exitCode !== null;
  }

  firstExit(): Promise<string> {
    return Promise.race(this.exits.values());
  }

  /** Last resort (a second Ctrl-C): SIGKILL every process still running. */
  killAll(): void {
    for (const child of this.procs.values()) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }

  async stop(names: string[]): Promise<void> {
    await Promise.all(
      names.map(async (name) => {
        const child = this.procs.get(name);
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await this.exits.get(name);
        clearTimeout(killer);
      }),
    );
  }
}
