import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import { projectRoot } from '../../src/worker/paths';
import { DATUM } from './cli';

/** A real `datum agent` process serving `configs`, its output kept for the test's messages and assertions. */
export interface AgentProcess {
  child: ChildProcess;
  output: () => string;
  /** Resolves with its exit code (null: killed by a signal). */
  exited: Promise<number | null>;
}

/**
 * A user other than the test's (root) to run the agent as, as the packaged unit runs it (User=datum,
 * no capabilities): started through setpriv, with the environment a service of that user has.
 */
export interface RunAs {
  uid: number;
  gid: number;
  env: NodeJS.ProcessEnv;
  /** Where that user reaches bin/datum.js, when it cannot search the clone's own path (reachableClone). */
  datum?: string;
}

export function startAgentProcess(configs: string[], address: string, children: ChildProcess[], as?: RunAs): AgentProcess {
  const args = [as?.datum ?? DATUM, 'agent', ...configs.flatMap((c) => ['--config', c]), '--address', address];
  const child = as
    ? spawn('setpriv', [`--reuid=${as.uid}`, `--regid=${as.gid}`, '--clear-groups', '--', process.execPath, ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...as.env },
      })
    : spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr.on('data', (b: Buffer) => (output += b.toString()));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return { child, output: () => output, exited };
}

/** Until the agent says it serves its nodes (or exits first, which fails the wait with its output). */
export async function serving(agent: AgentProcess, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!/datum agent: serving /.test(agent.output())) {
    if (agent.child.exitCode !== null)
      throw new Error(`the agent exited (${agent.child.exitCode}) before serving:\n${agent.output()}`);
    if (Date.now() > deadline) throw new Error(`the agent did not start serving within ${timeoutMs} ms:\n${agent.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A path where any user reaches this clone: its own when every directory above it lets others
 * search (a checkout in /work or /home), else a bind mount of it under `base` (a clone made in a
 * `mktemp -d` directory, mode 0700, which an agent run as another user could not start from).
 * Returns the clone's path for that user and how to undo the mount.
 */
export function reachableClone(base: string): { root: string; release: () => void } {
  const root = projectRoot();
  const blocked = ancestors(root).some((dir) => (statSync(dir).mode & 0o001) === 0);
  if (!blocked) return { root, release: () => {} };
  const mounted = path.join(base, 'clone');
  mkdirSync(mounted, { recursive: true });
  execFileSync('mount', ['--bind', root, mounted]);
  return { root: mounted, release: () => execFileSync('umount', ['-l', mounted]) };
}

function ancestors(dir: string): string[] {
  const up = path.dirname(dir);
  return up === dir ? [dir] : [dir, ...ancestors(up)];
}
