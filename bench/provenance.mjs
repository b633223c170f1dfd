// What every bench row carries so a reader can weigh it: the commit it measured (and whether the
// tree had changes the commit does not hold), and each process's memory as the kernel counts it:
// now (VmRSS) and the most it ever held (VmHWM), since one end-of-row sample can sit anywhere in a
// garbage collector's cycle.

import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

/** The commit of the tree the bench runs from, and whether tracked files differ from it. */
export function provenance() {
  const git = (...args) => execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' }).trim();
  try {
    return { commit: git('rev-parse', 'HEAD'), dirty: git('status', '--porcelain') !== '' };
  } catch (err) {
    return { commit: null, dirty: null, why: `git could not say: ${err.message.split('\n')[0]}` };
  }
}

/** A process's resident memory now and at its peak (MB), or nulls once it is gone. */
export async function memoryMb(pid) {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)[1]);
    return { rss: Math.round(kb('VmRSS') / 1024), peak: Math.round(kb('VmHWM') / 1024) };
  } catch {
    return { rss: null, peak: null };
  }
}

const STACK = /\btemporal(-server)?\b.*\bserver\b|temporal-test-server|\bdatum(\.js)?\s+(agent|worker|cluster)\b|\bvitest\b/;

/**
 * Other stacks on this machine (Temporal servers, Datum agents or workers, test runs): each
 * competes with every process a row measures, so the bench refuses to start beside them unless
 * told, and then the row names them.
 */
export async function othersRunning() {
  const { readdir } = await import('node:fs/promises');
  const others = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    const cmd = await readFile(`/proc/${entry}/cmdline`, 'utf8').then(
      (c) => c.replace(/\0/g, ' ').trim(),
      () => '',
    );
    if (STACK.test(cmd)) others.push(`${entry} ${cmd.slice(0, 120)}`);
  }
  return others;
}
