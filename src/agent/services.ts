import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { withFix } from '../contract';
import type { Json } from '../domain';
import { atomicWriteJson, readJsonOrNull, readdirOrEmpty } from './fsx';
import { datumPath, isErrno, locate, realRoot } from './paths';
import { AgentRefusal, SERVICE_START_FAILED } from './refusal';

/*
 * The processes the agent manages. Each service started under a root has a state file
 * <root>/.datum/services/<key>.json = {pid, port, start_ticks, command, started_at, …} and a log
 * <root>/.datum/services/<key>.log. A process is "ours" only while /proc/<pid>/stat still shows
 * the start time we recorded: after a reboot or pid reuse the pid may name a stranger, which
 * the agent must neither report as the service nor signal.
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
});
export type ServiceState = z.infer<typeof serviceState>;

const stateRel = (key: string) => `.datum/services/${key}.json`;

/** The recorded state of service `key`, without creating anything (observe is read-only). */
export async function readServiceState(root: string, key: string): Promise<ServiceState | null> {
  const loc = await locate(root, stateRel(key), 'service state path');
  const parsed = serviceState.safeParse(await readJsonOrNull(loc.abs));
  return parsed.success ? parsed.data : null;
}

/**
 * Field 22 of /proc/<pid>/stat: the process's start time in clock ticks since boot. Null when
 * there is no such process or it has already exited (a zombie is not running anything).
 */
export async function startTicks(pid: number): Promise<string | null> {
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
  return fields[22 - 3] ?? null;
}

/** True while the recorded process is alive and is still the one we started. */
export async function isRunning(state: ServiceState): Promise<boolean> {
  return state.start_ticks !== null && (await startTicks(state.pid)) === state.start_ticks;
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, signal);
      return;
    } catch (err) {
      if (!isErrno(err, 'ESRCH')) throw err;
    }
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
export async function stopInstance(state: ServiceState, graceMs = 5000): Promise<string> {
  if (!(await isRunning(state))) return `pid ${state.pid} was no longer running`;
  const gone = async () => !(await isRunning(state));
  signalGroup(state.pid, 'SIGTERM');
  if (await waitUntil(gone, graceMs)) return `stopped pid ${state.pid} with SIGTERM`;
  signalGroup(state.pid, 'SIGKILL');
  if (await waitUntil(gone, 2000)) return `killed pid ${state.pid} with SIGKILL after it ignored SIGTERM for ${graceMs / 1000} s`;
  throw new Error(`pid ${state.pid} of service ${state.key} survived SIGTERM and SIGKILL`);
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

export interface LaunchRequest {
  root: string;
  key: string;
  command: string[];
  /** Real path of the release directory the command runs in. */
  cwd: string;
  /** Absolute path of the config file (DATUM_CONFIG). */
  configPath: string;
  now: () => Date;
}

/**
 * Spawns the service detached in its own process group (it survives the agent), output
 * appended to its log, and records it. The returned state's start_ticks is null when the
 * process was already gone when we looked.
 */
export async function launch(req: LaunchRequest): Promise<ServiceState> {
  const port = await freePort();
  const logPath = await datumPath(req.root, `services/${req.key}.log`);
  const startedAt = req.now().toISOString();
  const env: NodeJS.ProcessEnv = {};
  for (const name of PASSED_ENV) if (process.env[name] !== undefined) env[name] = process.env[name];
  env.PORT = String(port);
  env.DATUM_CONFIG = req.configPath;

  const log = await fs.open(logPath, 'a');
  let pid: number;
  try {
    await log.write(`--- datum ${startedAt}: starting ${JSON.stringify(req.command)} in ${req.cwd} on port ${port}\n`);
    const child = spawn(req.command[0], req.command.slice(1), {
      cwd: req.cwd,
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
          `could not start ${JSON.stringify(req.command)} in ${req.cwd}: ${outcome?.message ?? 'no pid'}`,
          'check the command of the service resource and that the release contains it',
        ),
      );
    }
    child.unref();
    pid = child.pid;
  } finally {
    await log.close();
  }
  const state: ServiceState = {
    key: req.key,
    pid,
    port,
    start_ticks: await startTicks(pid),
    command: req.command,
    started_at: startedAt,
    cwd: req.cwd,
    config_path: req.configPath,
    log: path.relative(req.root, logPath),
  };
  await atomicWriteJson(await datumPath(req.root, `services/${req.key}.json`), state);
  return state;
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
  const dir = path.dirname((await locate(real, stateRel('_'), 'service state path')).abs);
  const names = await readdirOrEmpty(dir);
  const stopped: Array<{ key: string; pid: number; result: string }> = [];
  for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
    const key = name.slice(0, -'.json'.length);
    const state = await readServiceState(real, key);
    if (state === null) continue;
    stopped.push({ key, pid: state.pid, result: await stopInstance(state) });
    await fs.rm(path.join(dir, name), { force: true });
  }
  return stopped;
}
