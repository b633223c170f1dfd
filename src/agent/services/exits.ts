import type { ChildProcess } from 'node:child_process';

/*
 * A service the agent spawned itself is its child: its death is an `exit` event, and a watch
 * waits on that event instead of reading /proc every 500 ms. An instance the agent did not spawn
 * (one a previous agent process started and this one adopted, or a systemd unit) is nobody's
 * child here, and Node offers no pidfd to wait on it: the watch keeps polling /proc for those.
 */

const running = new Map<number, Set<() => void>>();

/** Follows a child the agent just spawned until it exits. */
export function followChild(child: ChildProcess): void {
  const pid = child.pid;
  if (pid === undefined) return;
  running.set(pid, new Set());
  child.once('exit', () => {
    const wakers = running.get(pid);
    running.delete(pid);
    for (const wake of wakers ?? []) wake();
  });
}

/**
 * Calls `wake` when the child `pid` exits, if it is a running child of this process. Returns how
 * to stop waiting, or null when `pid` is not one (the caller must poll for it).
 */
export function onChildExit(pid: number, wake: () => void): (() => void) | null {
  const wakers = running.get(pid);
  if (!wakers) return null;
  wakers.add(wake);
  return () => wakers.delete(wake);
}
