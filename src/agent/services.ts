import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { constants, promises as fs } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { withFix } from '../contract';
import type { Json } from '../domain';
import { atomicWriteAt, openAppendAt, readRegular, readdirOrEmpty, type HeldDir } from './fsx';
import { limits } from './limits';
import { isErrno, isInside, locateIn, openLocatedDir, realRoot } from './paths';
import { AgentRefusal, SERVICE_START_FAILED } from './refusal';
import {
  judgeUnit,
  showUnit,
  startUnit,
  stopUnit,
  systemdUsable,
  unitName,
  unitUser,
  type SystemdManager,
  type SystemdSettings,
} from './services-systemd';

/*
 * The processes the agent manages. Each service started under a root has a state file
 * <root>/.datum/services/<key>.json = {pid, port, start_ticks, command, started_at, …} and a log
 * <root>/.datum/services/<key>.log. A process is "ours" only while /proc/<pid>/stat still shows
 * the start time we recorded: after a reboot or pid reuse the pid may name a stranger, which
 * the agent must neither report as the service nor signal.
 *
 * The state file is not proof either: anyone who can write it can name any pid. So before any
 * signal (and before reporting a process as the service) `verifyIdentity` checks, from /proc,
 * everything the agent recorded at spawn: the start time, the command line, a working directory
 * under this root's releases, its own process group (Datum starts every service as a group
 * leader), and the nonce the agent put in its environment (DATUM_SERVICE_NONCE). pid ≤ 1 is
 * never a service. A process that fails any check is reported and never signalled.
 *
 * The nonce also closes the gap between spawning and recording: an intent record
 * (<key>.intent.json, with the nonce) is written before the spawn, so an agent killed after the
 * spawn finds the live process carrying that nonce on retry and adopts it instead of starting
 * a second instance.
 *
 * With agent.yaml's `services: { backend: systemd }` the instance is a transient systemd unit
 * instead (services-systemd.ts): the state file then also names the unit and its invocation,
 * and identity, stopping and adoption ask systemd. How an instance was started is recorded with
 * it, so a service started under one backend is stopped by that backend after a switch.
 */

const serviceState = z.object({
  key: z.string(),
  pid: z.number().int().positive(),
  port: z.number().int().positive(),
  start_ticks: z.string().nullable(),
  command: z.array(z.string()),
  started_at: z.string(),
  cwd: z.string(),
  config_path: z.string(),
  log: z.string(),
  /** Put in the instance's environment at spawn; absent only in state files from before it existed. */
  nonce: z.string().min(16).optional(),
  /** Set when the instance is a systemd unit (the systemd backend); absent: the agent's own child. */
  systemd: z
    .object({ unit: z.string().min(1), manager: z.enum(['system', 'user']), invocation_id: z.string().min(1) })
    .optional(),
});
export type ServiceState = z.infer<typeof serviceState>;

export const NONCE_ENV = 'DATUM_SERVICE_NONCE';
const stateRel = (key: string) => `.datum/services/${key}.json`;
const intentRel = (key: string) => `.datum/services/${key}.intent.json`;

export type ServiceRecord =
  { kind: 'absent' } | { kind: 'invalid'; file: string; why: string } | { kind: 'recorded'; file: string; state: ServiceState };

/** A JSON document under .datum/ (really inside it, never through a symlink); null when absent. */
async function readDatumJson(
  root: string,
  rel: string,
): Promise<{ ok: true; value: unknown } | { ok: false; why: string } | null> {
  const loc = await locateIn(root, rel, 'service state path', '.datum');
  let text: string;
  try {
    text = (await readRegular(loc.abs)).bytes.toString('utf8');
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return null;
    if (isErrno(err, 'ELOOP')) return { ok: false, why: 'it is a symlink, and Datum writes only regular files there' };
    throw err;
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, why: `it is not valid JSON (${(err as Error).message})` };
  }
}

/** The state file of service `key` as found, without creating anything (observe is read-only). */
export async function readServiceRecord(root: string, key: string): Promise<ServiceRecord> {
  const file = stateRel(key);
  const read = await readDatumJson(root, file);
  if (read === null) return { kind: 'absent' };
  if (!read.ok) return { kind: 'invalid', file, why: read.why };
  const parsed = serviceState.safeParse(read.value);
  if (!parsed.success)
    return {
      kind: 'invalid',
      file,
      why: parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; '),
    };
  if (parsed.data.key !== key) return { kind: 'invalid', file, why: `it is the state of "${parsed.data.key}", not of "${key}"` };
  return { kind: 'recorded', file, state: parsed.data };
}

/** The recorded state of service `key`, or null when there is none usable. */
export async function readServiceState(root: string, key: string): Promise<ServiceState | null> {
  const record = await readServiceRecord(root, key);
  return record.kind === 'recorded' ? record.state : null;
}

/**
 * Field 22 of /proc/<pid>/stat: the process's start time in clock ticks since boot. Null when
 * there is no such process or it has already exited (a zombie is not running anything).
 */
export async function startTicks(pid: number): Promise<string | null> {
  return (await procStat(pid))?.ticks ?? null;
}

/** Fields 5 (process group) and 22 (start time) of /proc/<pid>/stat; null when gone or a zombie. */
async function procStat(pid: number): Promise<{ pgrp: number; ticks: string } | null> {
  if (!Number.isSafeInteger(pid) || pid <= 0) return null;
  let text: string;
  try {
    text = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  } catch (err) {
    if (isErrno(err, 'ENOENT') || isErrno(err, 'ESRCH')) return null;
    throw err;
  }
  // Field 2 (comm) is parenthesised and may itself contain spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  if (state === 'Z' || state === 'X' || state === 'x') return null;
  const ticks = fields[22 - 3];
  return ticks === undefined ? null : { pgrp: Number(fields[5 - 3]), ticks };
}

/** True while the recorded process is alive with the recorded start time (see verifyIdentity for proof). */
export async function isRunning(state: ServiceState): Promise<boolean> {
  return state.start_ticks !== null && (await startTicks(state.pid)) === state.start_ticks;
}

/** ours: provably the instance Datum started; gone: not running (any more); foreign: a live stranger. */
export type Identity = { kind: 'ours' } | { kind: 'gone' } | { kind: 'foreign'; why: string };

/** A /proc/<pid>/<file> as text, or the reason it cannot be read. */
async function procText(pid: number, file: 'cmdline' | 'environ'): Promise<string | { unreadable: string }> {
  try {
    return await fs.readFile(`/proc/${pid}/${file}`, 'utf8');
  } catch (err) {
    return { unreadable: (err as NodeJS.ErrnoException).code ?? (err as Error).message };
  }
}

/**
 * Whether the process a state file names is the instance Datum started under `root` (a real
 * path), judged from /proc only. A different start time means the pid was reused: the service
 * is gone, an ordinary state after a crash or a reboot. Anything else that does not match is a
 * forgery or a stranger, and is never signalled.
 */
export async function verifyIdentity(root: string, state: ServiceState): Promise<Identity> {
  const foreign = (why: string): Identity => ({ kind: 'foreign', why: `pid ${state.pid} ${why}` });
  if (state.pid <= 1) return foreign('is the init process, never a service Datum started');
  if (state.systemd !== undefined) return await verifyUnit(state, state.systemd);
  const stat = await procStat(state.pid);
  if (stat === null || state.start_ticks === null || stat.ticks !== state.start_ticks) return { kind: 'gone' };
  if (stat.pgrp !== state.pid)
    return foreign(`is in process group ${stat.pgrp}, not its own; Datum starts every service as the leader of its own group`);
  const cmdline = await procText(state.pid, 'cmdline');
  if (typeof cmdline !== 'string') return foreign(`cannot be inspected (/proc/${state.pid}/cmdline: ${cmdline.unreadable})`);
  const argv = cmdline.split('\0').slice(0, -1);
  if (!runsCommand(argv, state.command))
    return foreign(`runs ${JSON.stringify(argv)}, not the recorded ${JSON.stringify(state.command)}`);
  const cwd = await fs.readlink(`/proc/${state.pid}/cwd`).catch((err: NodeJS.ErrnoException) => `(unreadable: ${err.code})`);
  if (!isInside(path.join(root, 'releases'), cwd)) return foreign(`works in ${cwd}, not in a release of this node`);
  if (state.nonce === undefined) return { kind: 'ours' }; // a state file from before nonces: the checks above
  const environ = await procText(state.pid, 'environ');
  if (typeof environ !== 'string') return foreign(`cannot be inspected (/proc/${state.pid}/environ: ${environ.unreadable})`);
  if (!environ.split('\0').includes(`${NONCE_ENV}=${state.nonce}`))
    return foreign(`does not carry the nonce the agent gave the instance it started (${NONCE_ENV})`);
  return { kind: 'ours' };
}

/**
 * The systemd backend's identity: systemd's own account of the unit (loaded, the recorded
 * invocation and main pid, the nonce in its environment), and the start time /proc shows for
 * that pid (so the marker and the watch agree with it). The cgroup, not /proc, is the proof here.
 */
async function verifyUnit(state: ServiceState, unit: NonNullable<ServiceState['systemd']>): Promise<Identity> {
  let show: Record<string, string>;
  try {
    show = await showUnit(unit.manager, unit.unit);
  } catch (err) {
    return { kind: 'foreign', why: `unit ${unit.unit} cannot be inspected (${(err as Error).message})` };
  }
  const judged = judgeUnit(show, {
    unit: unit.unit,
    pid: state.pid,
    invocation_id: unit.invocation_id,
    nonce: `${NONCE_ENV}=${state.nonce ?? ''}`,
  });
  if (judged.kind !== 'ours') return judged;
  return (await isRunning(state)) ? judged : { kind: 'gone' };
}

/** How a person finds the instance: "pid 123", or "datum-N\x2d24-app.service (pid 123)" for a unit. */
export function describeInstance(state: ServiceState): string {
  if (state.systemd === undefined) return `pid ${state.pid}`;
  return state.pid > 0 ? `${state.systemd.unit} (pid ${state.pid})` : state.systemd.unit;
}

/**
 * Whether a process's argv is the recorded command: the same words, or the same words after
 * the interpreter the kernel put in front of a script with a "#!" line (["/bin/sh", "./run.sh"]
 * for the command ["./run.sh"]). A service that rewrites its own argv cannot be verified, and is
 * reported as such rather than guessed at.
 */
function runsCommand(argv: string[], command: string[]): boolean {
  if (argv.length < command.length || argv.length > command.length + 2) return false;
  return JSON.stringify(argv.slice(argv.length - command.length)) === JSON.stringify(command);
}

/** The refusal for a state file naming a process Datum cannot prove it started. */
export function unverified(key: string, file: string, why: string): AgentRefusal {
  return new AgentRefusal(
    'ServiceIdentityUnverified',
    withFix(
      `the state file ${file} of service "${key}" names a process Datum cannot prove it started: ${why}; nothing was signalled`,
      `check that process by hand, then remove ${file}; the next start records the instance it starts`,
    ),
    { service: key, state_file: file },
  );
}

/** Signals the process group of a verified instance (its pid is the group's id). */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (err) {
    if (!isErrno(err, 'ESRCH')) throw err;
  }
}

// The waits below need not heartbeat: the apply that runs them beats from a timer (heartbeat.ts).
async function waitUntil(done: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await done()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
}

/**
 * Stops one recorded instance: SIGTERM to its process group, up to `graceMs` to exit, then
 * SIGKILL. Only ever called on the way to starting the service again (a restart), or by an
 * operator's explicit clean-up: killing without restart is destructive and never a repair.
 */
export async function stopInstance(root: string, state: ServiceState, graceMs = 5000): Promise<string> {
  if (state.systemd !== undefined) return await stopUnitInstance(root, state, state.systemd);
  // Identity is proved again right before each signal: between two checks the pid may exit and
  // be reused, and a signal to a stranger cannot be taken back.
  const prove = async (): Promise<boolean> => {
    const identity = await verifyIdentity(root, state);
    if (identity.kind === 'foreign') throw unverified(state.key, stateRel(state.key), identity.why);
    return identity.kind === 'ours';
  };
  if (!(await prove())) return `pid ${state.pid} was no longer running`;
  const gone = async () => !(await isRunning(state));
  signalGroup(state.pid, 'SIGTERM');
  if (await waitUntil(gone, graceMs)) return `stopped pid ${state.pid} with SIGTERM`;
  if (!(await prove())) return `stopped pid ${state.pid} with SIGTERM`;
  signalGroup(state.pid, 'SIGKILL');
  if (await waitUntil(gone, 2000)) return `killed pid ${state.pid} with SIGKILL after it ignored SIGTERM for ${graceMs / 1000} s`;
  throw new Error(`pid ${state.pid} of service ${state.key} survived SIGTERM and SIGKILL`);
}

/**
 * The systemd backend's stop: `systemctl stop` (SIGTERM to every process of the unit, SIGKILL
 * after TimeoutStopSec), only once systemd confirms the unit still runs the recorded instance.
 */
async function stopUnitInstance(root: string, state: ServiceState, unit: NonNullable<ServiceState['systemd']>): Promise<string> {
  const identity = await verifyIdentity(root, state);
  if (identity.kind === 'foreign') throw unverified(state.key, stateRel(state.key), identity.why);
  if (identity.kind === 'gone') return `${describeInstance(state)} was no longer running`;
  await stopUnit(unit.manager, unit.unit);
  if (!(await waitUntil(async () => !(await isRunning(state)), 2000)))
    throw new Error(`pid ${state.pid} of service ${state.key} survived systemctl stop ${unit.unit}`);
  return `stopped ${describeInstance(state)} with systemctl stop`;
}

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

/** The intent record written before a spawn: what would be recorded, and the nonce to find it by. */
const launchIntent = z.object({
  key: z.string(),
  nonce: z.string().min(16),
  tag: z.string(),
  port: z.number().int().positive(),
  command: z.array(z.string()),
  cwd: z.string(),
  config_path: z.string(),
  started_at: z.string(),
  log: z.string(),
  /** Set when the launch goes through systemd: the unit to look for on a retry. */
  systemd: z.object({ unit: z.string().min(1), manager: z.enum(['system', 'user']) }).optional(),
});
type LaunchIntent = z.infer<typeof launchIntent>;

/** <root>/.datum/services, held open (reached without following a symlink). */
async function servicesDir(root: string): Promise<HeldDir> {
  const rel = stateRel('_');
  const loc = await locateIn(root, rel, 'service state path', '.datum');
  return await openLocatedDir(root, loc, rel, 'service state path');
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
      await fs.rm(dir.at(intentName), { force: true });
      throw err;
    }
    crashPointForTests('service.spawned');
    if (spawned === null) {
      // The unit was gone before its pid could be read: nothing runs, nothing to record. The
      // caller sees what it sees of a child that exited at once (start_ticks null).
      await fs.rm(dir.at(intentName), { force: true });
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
    await fs.rm(dir.at(intentName), { force: true });
    return state;
  } finally {
    await dir.close();
  }
}

const stateOf = (intent: LaunchIntent): Omit<ServiceState, 'pid' | 'start_ticks'> => ({
  key: intent.key,
  port: intent.port,
  command: intent.command,
  started_at: intent.started_at,
  cwd: intent.cwd,
  config_path: intent.config_path,
  log: intent.log,
  nonce: intent.nonce,
});

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
    child.unref();
    return child.pid;
  } finally {
    await log.close();
  }
}

/**
 * Keeps a service log under MAX_SERVICE_LOG_BYTES: past it, its last MAX_SERVICE_LOG_BYTES go
 * to <log>.1 (replacing the previous one) and the log is truncated. The service writes with
 * O_APPEND, so it simply continues at the new end.
 */
export async function rotateLog(dir: HeldDir, logName: string): Promise<void> {
  let handle;
  try {
    handle = await fs.open(dir.at(logName), constants.O_RDWR | constants.O_NOFOLLOW);
  } catch (err) {
    if (isErrno(err, 'ENOENT') || isErrno(err, 'ELOOP')) return; // nothing to rotate; a symlink is refused on open
    throw err;
  }
  try {
    const { size } = await handle.stat();
    if (size <= limits.serviceLogBytes) return;
    const tail = Buffer.alloc(limits.serviceLogBytes);
    const { bytesRead } = await handle.read(tail, 0, tail.length, size - tail.length);
    await atomicWriteAt(dir, `${logName}.1`, tail.subarray(0, bytesRead));
    await handle.truncate(0);
  } finally {
    await handle.close();
  }
}

/** Rotates service `key`'s log if it outgrew its cap (observe calls this: the log is Datum's own). */
export async function capServiceLog(root: string, key: string): Promise<void> {
  const dir = await servicesDir(root);
  try {
    await rotateLog(dir, `${key}.log`);
  } finally {
    await dir.close();
  }
}

/**
 * After an agent was killed between spawning service `key` and recording it: finds the live
 * process carrying the intent's nonce, and records it as the service (if it proves to be ours)
 * so the retry adopts it instead of starting a second instance. The intent is removed either
 * way. Returns the adopted state and the tag of the launch it came from, or null.
 */
export async function adoptInterrupted(root: string, key: string): Promise<{ state: ServiceState; tag: string } | null> {
  const read = await readDatumJson(root, intentRel(key));
  if (read === null) return null;
  const dir = await servicesDir(root);
  try {
    const parsed = read.ok ? launchIntent.safeParse(read.value) : null;
    let adopted: { state: ServiceState; tag: string } | null = null;
    const found = parsed?.success ? await findLaunched(parsed.data) : null;
    if (parsed?.success && found !== null) {
      const { pid, systemd } = found;
      const state: ServiceState = {
        ...stateOf(parsed.data),
        pid,
        start_ticks: await startTicks(pid),
        ...(systemd ? { systemd } : {}),
      };
      if (state.key === key && (await verifyIdentity(root, state)).kind === 'ours') {
        await atomicWriteAt(dir, `${key}.json`, `${JSON.stringify(state, null, 2)}\n`);
        adopted = { state, tag: parsed.data.tag };
      }
    }
    await fs.rm(dir.at(path.basename(intentRel(key))), { force: true });
    return adopted;
  } finally {
    await dir.close();
  }
}

/** The instance an interrupted launch started: its unit's main pid (systemd), or the process carrying the nonce. */
async function findLaunched(intent: LaunchIntent): Promise<{ pid: number; systemd?: ServiceState['systemd'] } | null> {
  if (intent.systemd === undefined) {
    const pid = await findByNonce(intent.nonce);
    return pid === null ? null : { pid };
  }
  // systemctl failing throws: the intent stays for the next attempt, which must not start a second unit.
  const show = await showUnit(intent.systemd.manager, intent.systemd.unit);
  const pid = Number(show.MainPID ?? 0);
  const invocation = show.InvocationID;
  if (pid <= 1 || !invocation) return null;
  // judgeUnit then verifyIdentity check the rest (loaded, live, the nonce) against what is recorded.
  const judged = judgeUnit(show, {
    unit: intent.systemd.unit,
    pid,
    invocation_id: invocation,
    nonce: `${NONCE_ENV}=${intent.nonce}`,
  });
  return judged.kind === 'ours' ? { pid, systemd: { ...intent.systemd, invocation_id: invocation } } : null;
}

/** The group leader whose environment carries DATUM_SERVICE_NONCE=<nonce>, or null. */
async function findByNonce(nonce: string): Promise<number | null> {
  const needle = `${NONCE_ENV}=${nonce}`;
  for (const name of await readdirOrEmpty('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const environ = await procText(pid, 'environ');
    if (typeof environ !== 'string' || !environ.split('\0').includes(needle)) continue;
    // Its children inherit the nonce; the instance itself leads its own process group.
    if ((await procStat(pid))?.pgrp === pid) return pid;
  }
  return null;
}

export type Health = { ok: true; status: number; body: Json } | { ok: false; error: string };

/** GET http://127.0.0.1:<port>/health: the service's own account of what it runs. */
export async function probeHealth(port: number, timeoutMs: number): Promise<Health> {
  return await new Promise<Health>((resolve) => {
    const req = http.get(
      {
        host: '127.0.0.1',
        port,
        path: '/health',
        agent: false,
        signal: AbortSignal.timeout(timeoutMs),
        headers: { accept: 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size <= 65536) chunks.push(chunk);
        });
        res.on('error', (err) => resolve({ ok: false, error: err.message }));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status !== 200) return resolve({ ok: false, error: `answered HTTP ${status}` });
          try {
            resolve({ ok: true, status, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json });
          } catch (err) {
            resolve({ ok: false, error: `answered something that is not JSON (${(err as Error).message})` });
          }
        });
      },
    );
    req.on('error', (err) =>
      resolve({
        ok: false,
        error: err.name === 'AbortError' || err.name === 'TimeoutError' ? `did not answer within ${timeoutMs} ms` : err.message,
      }),
    );
  });
}

/** Polls /health until it answers, the process dies, or `ms` pass. */
export async function waitHealthy(state: ServiceState, ms: number): Promise<Health & { exited?: boolean }> {
  const deadline = Date.now() + ms;
  let last: Health = { ok: false, error: 'was not asked' };
  for (;;) {
    if (!(await isRunning(state))) return { ok: false, error: `the process exited (see ${state.log})`, exited: true };
    last = await probeHealth(state.port, Math.max(250, Math.min(2000, deadline - Date.now())));
    if (last.ok || Date.now() >= deadline) return last;
    await sleep(150);
  }
}

/**
 * Stops every service the agent started under `root` and forgets them (the state files go; the
 * logs stay). For tests and for an operator's clean-up, never for a repair.
 */
export async function stopServices(root: string): Promise<Array<{ key: string; pid: number; result: string }>> {
  const real = await realRoot(root, false);
  const dir = path.dirname((await locateIn(real, stateRel('_'), 'service state path', '.datum')).abs);
  const names = await readdirOrEmpty(dir);
  const stopped: Array<{ key: string; pid: number; result: string }> = [];
  for (const name of names.filter((n) => n.endsWith('.json') && !n.endsWith('.intent.json')).sort()) {
    const key = name.slice(0, -'.json'.length);
    await adoptInterrupted(real, key);
    const state = await readServiceState(real, key);
    if (state === null) continue;
    const result = await stopInstance(real, state).catch((err: Error) => {
      if (err instanceof AgentRefusal && err.type === 'ServiceIdentityUnverified') return `not signalled: ${err.message}`;
      throw err;
    });
    stopped.push({ key, pid: state.pid, result });
    await fs.rm(path.join(dir, name), { force: true });
  }
  return stopped;
}
