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

/** Ends the bench with exit 2 and a message saying what to change. */
export function fail(message) {
  console.error(`bench: ${message}`);
  process.exit(2);
}

/**
 * What every bench script does first: its options read (a bad one ends it, naming the usage), a
 * `whole(name, min)` check for number options, and the tree it measures taken before anything is
 * built from it; it refuses to start beside another stack unless given --beside-others.
 */
export async function benchStart(usage, options) {
  const { parseArgs } = await import('node:util');
  let values;
  try {
    ({ values } = parseArgs({ options: { ...options, 'beside-others': { type: 'boolean', default: false } } }));
  } catch (e) {
    fail(`${e.message}\n${usage}`);
  }
  const whole = (name, min) => {
    const v = Number(values[name]);
    if (!Number.isInteger(v) || v < min) fail(`--${name} ${values[name]} must be a whole number of ${min} or more\n${usage}`);
    return v;
  };
  const measured = provenance();
  const others = await othersRunning();
  if (others.length > 0 && !values['beside-others'])
    fail(
      `other stacks run on this machine and would compete with every process a row measures:\n  ${others.join('\n  ')}\n` +
        'stop them, or pass --beside-others to measure anyway (each row then counts them under beside_others)',
    );
  return { values, whole, measured, others };
}
