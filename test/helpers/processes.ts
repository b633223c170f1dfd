import type { ChildProcess } from 'node:child_process';
import { readdirSync, readlinkSync } from 'node:fs';
import { afterEach } from 'vitest';

/** SIGKILLs each child still running, and empties the list. */
export function killChildren(children: ChildProcess[]): void {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}

/**
 * The processes a test file starts beside its stack (writers, agents, CLIs): push each one, and
 * whatever is still running after a test is SIGKILLed.
 */
export function useChildren(): ChildProcess[] {
  const children: ChildProcess[] = [];
  afterEach(() => killChildren(children));
  return children;
}

/**
 * Kills (SIGKILL) every process running inside `dir`: the services the agents of a test started
 * there outlive their agent by design (a restarted agent adopts them), so a test's teardown
 * stops them itself before it removes the directory. Returns the pids it killed.
 */
export function killProcessesUnder(dir: string): number[] {
  const killed: number[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let cwd: string;
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      continue; // gone, or not ours to read
    }
    if (cwd !== dir && !cwd.startsWith(`${dir}/`)) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // ended meanwhile
    }
  }
  return killed;
}

type Releasable = {
  teardown?: (this: void) => unknown;
  stop?: (this: void) => unknown;
  remove?: (this: void) => unknown;
  close?: (this: void) => unknown;
};

/** Stops what a started part holds: a Temporal environment, a receiver, a fleet's directory, a store. */
async function release(part: unknown): Promise<void> {
  const p = part as Releasable | null;
  const how = (['teardown', 'stop', 'remove', 'close'] as const).find((m) => typeof p?.[m] === 'function');
  if (!p || !how) return;
  try {
    await (p as Record<string, () => unknown>)[how]();
  } catch {
    // already failing: the start's own error is the one to report
  }
}

/**
 * Awaits parts started side by side. When one fails, each part that did start is stopped before
 * the first error is thrown, so a failed start (a workflow bundle that does not build, say)
 * leaves no Temporal server running behind it.
 */
export async function startTogether<T extends readonly unknown[]>(
  parts: readonly [...{ [K in keyof T]: Promise<T[K]> }],
): Promise<T> {
  const settled: PromiseSettledResult<unknown>[] = await Promise.allSettled(parts as readonly Promise<unknown>[]);
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (!failure) return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
  for (const s of settled) if (s.status === 'fulfilled') await release(s.value);
  throw failure.reason;
}
