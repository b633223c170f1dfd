import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
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
}

export function startAgentProcess(configs: string[], address: string, children: ChildProcess[], as?: RunAs): AgentProcess {
  const args = [DATUM, 'agent', ...configs.flatMap((c) => ['--config', c]), '--address', address];
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
