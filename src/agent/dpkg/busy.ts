import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { asyncLocalStorage } from '@temporalio/activity';
import { admindirOf } from './query';

/*
 * Whether a dpkg (or an apt-get, which takes the same locks) is at work on the database under a
 * root. While one runs, dpkg-query reads the package it works on mid-way (half-installed,
 * unpacked, half-configured): a true reading of a moment that is over a second later, and no
 * ground for a plan or for the last sighting of another writer. dpkg holds two fcntl locks for its
 * whole run, <admindir>/lock-frontend and <admindir>/lock, and the kernel lists every such lock in
 * /proc/locks by device and inode, so the agent sees them without taking them (taking them would
 * stop the very dpkg it waits for).
 */

/** The locks dpkg and apt hold on a database for as long as they work on it. */
const LOCK_FILES = ['lock-frontend', 'lock'];
/** How often the agent looks again while dpkg works. */
const POLL_MS = 100;

/** "maj:min:inode" as /proc/locks names a file: the device's major and minor in hex, the inode in decimal. */
function lockId(dev: number, ino: number): string {
  const major = (dev >>> 8) & 0xfff;
  const minor = (dev & 0xff) | ((dev >>> 12) & 0xfff00);
  return `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}:${ino}`;
}

/**
 * The pids holding dpkg's locks on the database under `root` (-1 for a lock that names no
 * process, an open file description's). Empty when none is held, when the database has no lock
 * file yet, or where the kernel does not list its locks.
 */
export async function dpkgHolders(root: string, locks = '/proc/locks'): Promise<number[]> {
  const ids = new Set<string>();
  for (const name of LOCK_FILES) {
    const st = await stat(path.join(admindirOf(root), name)).catch(() => null);
    if (st) ids.add(lockId(st.dev, st.ino));
  }
  if (ids.size === 0) return [];
  const listed = await readFile(locks, 'utf8').catch(() => '');
  const holders = new Set<number>();
  for (const line of listed.split('\n')) {
    // "1: POSIX  ADVISORY  WRITE 13218 fe:00:10028882 0 EOF"; a waiter's line has "->" after the number.
    const f = line.trim().split(/\s+/);
    if (f[1] === '->' || f.length < 6 || !ids.has(f[5])) continue;
    holders.add(Number(f[4]));
  }
  return [...holders];
}

/**
 * Waits, at most `maxMs`, until no dpkg or apt works on the database under `root`, so what is read
 * next is where that run left the package. The holders it still saw when time ran out, or none.
 * Stops with the activity's cancellation.
 */
export async function untilDpkgIdle(root: string, maxMs: number): Promise<number[]> {
  const deadline = Date.now() + maxMs;
  const signal = asyncLocalStorage.getStore()?.cancellationSignal;
  for (;;) {
    const holders = await dpkgHolders(root);
    if (holders.length === 0 || Date.now() >= deadline) return holders;
    // Rejects at once with the attempt's cancellation (the gate frees its slot for the next).
    await sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now())), undefined, { signal });
  }
}
