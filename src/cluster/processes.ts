// The long-running processes of a local cluster: each in its own process group, its output in
// a log file, recorded in the cluster's state file so `down` (another process, later) finds and
// stops every one of them.

import { spawn } from 'node:child_process';
import { openSync, closeSync, promises as fs, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { ClusterError } from './errors';
import { LogLines } from './log-lines';
import { tail } from './postgres';

export interface ProcessRecord {
  name: string;
  pid: number;
  log: string;
  command: string[];
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether a recorded process still runs: its pid is alive and, where /proc tells, still runs the
 * recorded command. A pid the system gave to another program since, or a zombie, is not it.
 */
export function runs(p: ProcessRecord): boolean {
  if (!alive(p.pid)) return false;
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8');
  } catch {
    return process.platform !== 'linux'; // without /proc the pid is all there is to go by
  }
  return cmdline.replace(/\0$/, '') === p.command.join('\0');
}

/** Starts `command` detached (its own process group), output appended to `log`. */
export function startProcess(name: string, command: string[], log: string, env: NodeJS.ProcessEnv, cwd: string): ProcessRecord {
  const fd = openSync(log, 'a');
  try {
    const child = spawn(command[0], command.slice(1), { detached: true, stdio: ['ignore', fd, fd], env, cwd });
    if (child.pid === undefined)
      throw new ClusterError(`could not start ${name} (${command[0]})`, `check that ${command[0]} exists and is executable`);
    child.unref();
    return { name, pid: child.pid, log, command };
  } finally {
    closeSync(fd);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** SIGTERM to the process group, SIGKILL after `graceMs`; resolves once the leader is gone. */
export async function stopProcess(p: ProcessRecord, graceMs = 20_000): Promise<'stopped' | 'killed' | 'gone'> {
  if (!runs(p)) return 'gone';
  signalGroup(p.pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!runs(p)) return 'stopped';
    await sleep(100);
  }
  signalGroup(p.pid, 'SIGKILL');
  while (runs(p)) await sleep(50);
  return 'killed';
}

/** kill -9, to the whole group (a crash, for the fault tests). */
export async function killProcess(p: ProcessRecord): Promise<void> {
  signalGroup(p.pid, 'SIGKILL');
  const deadline = Date.now() + 10_000;
  while (runs(p) && Date.now() < deadline) await sleep(25);
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, signal);
      return;
    } catch {
      // the group is gone, or the leader was never a group leader: try the pid itself
    }
  }
}

/**
 * Waits for a line holding `text` in the process's log, written after byte `from` (the log's size
 * before the start: earlier runs appended to the same file); fails early, with the log's tail, when
 * the process exits.
 */
export async function waitForLog(p: ProcessRecord, text: string | RegExp, timeoutMs: number, from = 0): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const reader = new LogLines(p.log, from);
  const seen: string[] = [];
  const holds = (line: string) => (typeof text === 'string' ? line.includes(text) : text.test(line));
  for (;;) {
    const lines = reader.read();
    if (lines.some(holds)) return;
    seen.push(...lines);
    seen.splice(0, Math.max(0, seen.length - 20));
    const shown = () => tail([...seen, reader.partial()].join('\n'));
    if (!runs(p)) throw new ClusterError(`${p.name} exited during start-up:\n${shown()}`, `read ${p.log}`);
    if (Date.now() > deadline)
      throw new ClusterError(`${p.name} did not become ready within ${timeoutMs / 1000} s:\n${shown()}`, `read ${p.log}`);
    await sleep(200);
  }
}

/** The log's size in bytes: where the output of a process started now begins. */
export async function logSize(file: string): Promise<number> {
  try {
    return (await fs.stat(file)).size;
  } catch {
    return 0;
  }
}

/** Refuses a port that something already listens on, naming what it was meant for. */
export async function ensurePortFree(port: number, what: string): Promise<void> {
  const free = await new Promise<boolean>((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
  if (!free)
    throw new ClusterError(
      `port ${port} on 127.0.0.1 (${what}) is in use`,
      `stop what holds it (\`ss -ltnp 'sport = :${port}'\` shows it), or give the cluster another --port-base`,
    );
}

export const logPath = (dataDir: string, name: string) => path.join(dataDir, 'logs', `${name}.log`);
