import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { withFix } from '../../contract';
import { atomicWriteAt, openAppendAt, type HeldDir } from '../fs';
import { AgentRefusal, SERVICE_START_FAILED } from '../refusal';
import { followChild } from './exits';
import { startTicks } from './identity';
import { rotateLog } from './log';
import { NONCE_ENV, intentRel, servicesDir, stateOf, type LaunchIntent, type ServiceState } from './state';
import { startUnit, systemdUsable, unitName, unitUser, type SystemdManager, type SystemdSettings } from './systemd';

/** A port nobody listens on right now (the kernel picks it). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

// The service gets a deliberately small environment: the agent's own (Temporal credentials,
// cloud keys) is not the service's business. PORT and DATUM_CONFIG are the contract.
const PASSED_ENV = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'];

/** Who starts the instance: the agent itself (process), or systemd as a unit named after `node`. */
export type ServiceBackend = { kind: 'process' } | { kind: 'systemd'; node: string; settings: SystemdSettings };

export interface LaunchRequest {
  root: string;
  key: string;
  /** Default: the process backend. */
  backend?: ServiceBackend;
  command: string[];
  /** Real path of the release directory the command runs in. */
  cwd: string;
  /** Absolute path of the config file (DATUM_CONFIG). */
  configPath: string;
  /** What this launch is for (launchTag): a retry adopts an interrupted launch only with the same tag. */
  tag: string;
  now: () => Date;
}

/**
 * Spawns the service detached in its own process group (it survives the agent), output
 * appended to its log, and records it. The intent record goes first and the state file after,
 * so there is no moment at which a live instance is recorded nowhere (see adoptInterrupted).
 * The returned state's start_ticks is null when the process was already gone when we looked.
 */
export async function launch(req: LaunchRequest): Promise<ServiceState> {
  const backend = req.backend ?? { kind: 'process' };
  // agent.yaml is re-read on every apply: a switch to systemd on a host without it is refused
  // here with the words the agent's start would have used.
  const version = backend.kind === 'systemd' ? await usableSystemd(backend.settings.manager) : 0;
  const port = await freePort();
  const dir = await servicesDir(req.root);
  const intentName = path.basename(intentRel(req.key));
  try {
    const intent: LaunchIntent = {
      key: req.key,
      nonce: randomBytes(16).toString('hex'),
      tag: req.tag,
      port,
      command: req.command,
      cwd: req.cwd,
      config_path: req.configPath,
      started_at: req.now().toISOString(),
      log: `.datum/services/${req.key}.log`,
      ...(backend.kind === 'systemd'
        ? { systemd: { unit: unitName(backend.node, req.key), manager: backend.settings.manager } }
        : {}),
    };
    await atomicWriteAt(dir, intentName, `${JSON.stringify(intent, null, 2)}\n`);
    let spawned: { pid: number; systemd?: ServiceState['systemd'] } | null;
    try {
      spawned =
        backend.kind === 'systemd'
          ? await startUnitLogged(dir, req.root, intent, backend.settings, version)
          : { pid: await spawnLogged(dir, intent) };
    } catch (err) {
      await dir.remove(intentName);
      throw err;
    }
    crashPointForTests('service.spawned');
    if (spawned === null) {
      // The unit was gone before its pid could be read: nothing runs, nothing to record. The
      // caller sees what it sees of a child that exited at once (start_ticks null).
      await dir.remove(intentName);
      return { ...stateOf(intent), pid: 0, start_ticks: null, systemd: { ...intent.systemd!, invocation_id: '' } };
    }
    const { pid } = spawned;
    const state: ServiceState = {
      ...stateOf(intent),
      pid,
      start_ticks: await startTicks(pid),
      ...(spawned.systemd ? { systemd: spawned.systemd } : {}),
    };
    await atomicWriteAt(dir, `${req.key}.json`, `${JSON.stringify(state, null, 2)}\n`);
    await dir.remove(intentName);
    return state;
  } finally {
    await dir.close();
  }
}

/**
 * A test seam, inert unless DATUM_TEST_CRASH_AT names this point: the agent kills itself with
 * SIGKILL there, so a test can stop it exactly between two steps that must survive a crash.
 */
function crashPointForTests(point: 'service.spawned'): void {
  if (process.env.DATUM_TEST_CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}

/** The service's environment: a few of the agent's variables, and the contract's (PORT, DATUM_CONFIG, the nonce). */
function serviceEnv(intent: LaunchIntent, passed: readonly string[] = PASSED_ENV): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of passed) if (process.env[name] !== undefined) env[name] = process.env[name];
  env.PORT = String(intent.port);
  env.DATUM_CONFIG = intent.config_path;
  env[NONCE_ENV] = intent.nonce;
  return env;
}

/** Rotates the log if due, opens it to append (never through a symlink) and writes the start line. */
async function openLog(dir: HeldDir, intent: LaunchIntent, what: string) {
  const logName = path.basename(intent.log);
  await rotateLog(dir, logName);
  // O_APPEND|O_NOFOLLOW inside the held directory: a log swapped for a symlink is refused, never followed.
  const log = await openAppendAt(dir, logName).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ELOOP') throw err;
    throw new AgentRefusal(
      'PathOutsideRoot',
      withFix(`the service log ${intent.log} is a symlink, and Datum never writes through one`, `remove ${intent.log}`),
      { log: intent.log },
    );
  });
  try {
    await log.write(`--- datum ${intent.started_at}: starting ${what}\n`);
  } catch (err) {
    await log.close();
    throw err;
  }
  return log;
}

/** systemd's version, once its manager is known to answer; refuses as the agent's start would. */
async function usableSystemd(manager: SystemdManager): Promise<number> {
  const usable = await systemdUsable(manager);
  if (usable.ok) return usable.version;
  throw new AgentRefusal(
    SERVICE_START_FAILED,
    withFix(`agent.yaml sets services.backend: systemd, but ${usable.problem}`, usable.fix),
  );
}

/**
 * The systemd backend's spawn: the log is created and its start line written by the agent (as
 * for a child, never through a symlink), then the manager appends the unit's output to that same
 * path. It reopens the path itself; a swap in between needs write access to .datum/services,
 * which only the agent's user has, and a service running as that user could drive systemd-run
 * with the agent's own rights anyway. Null when the unit exited before its pid could be read.
 */
async function startUnitLogged(
  dir: HeldDir,
  root: string,
  intent: LaunchIntent,
  settings: SystemdSettings,
  version: number,
): Promise<{ pid: number; systemd: ServiceState['systemd'] } | null> {
  const unit = intent.systemd!;
  const user = unitUser(settings);
  // HOME is the agent's only when the service runs as the agent's user; systemd sets another user's.
  const passed = settings.user === undefined ? PASSED_ENV : PASSED_ENV.filter((n) => n !== 'HOME');
  const what = `${JSON.stringify(intent.command)} in ${intent.cwd} on port ${intent.port} as ${unit.unit}`;
  const log = await openLog(dir, intent, what);
  await log.close();
  const started = await startUnit({
    unit: unit.unit,
    manager: unit.manager,
    version,
    description: `Datum service ${intent.key} (${intent.cwd})`,
    cwd: intent.cwd,
    command: intent.command,
    env: serviceEnv(intent, passed),
    log: path.join(root, intent.log),
    ...(user !== undefined ? { user } : {}),
    properties: settings.properties,
  });
  if (started.kind === 'exited') return null;
  return { pid: started.pid, systemd: { ...unit, invocation_id: started.invocation_id } };
}

async function spawnLogged(dir: HeldDir, intent: LaunchIntent): Promise<number> {
  const env = serviceEnv(intent);
  const what = `${JSON.stringify(intent.command)} in ${intent.cwd} on port ${intent.port}`;
  const log = await openLog(dir, intent, what);
  try {
    const child = spawn(intent.command[0], intent.command.slice(1), {
      cwd: intent.cwd,
      env,
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
    });
    // 'spawn' or 'error', whichever comes first (events.once would reject on 'error').
    const outcome = await new Promise<Error | null>((resolve) => {
      child.once('spawn', () => resolve(null));
      child.once('error', resolve);
    });
    if (outcome !== null || child.pid === undefined) {
      throw new AgentRefusal(
        SERVICE_START_FAILED,
        withFix(
          `could not start ${JSON.stringify(intent.command)} in ${intent.cwd}: ${outcome?.message ?? 'no pid'}`,
          'check the command of the service resource and that the release contains it',
        ),
      );
    }
    // Its exit wakes a watch at once (exits.ts); unref'd, it does not keep the agent running.
    followChild(child);
    child.unref();
    return child.pid;
  } finally {
    await log.close();
  }
}
