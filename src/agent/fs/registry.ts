import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { readRegular, type Identity } from './held';
import { lockExclusive, lockedByAnyone, type HeldLock } from './locks';

/*
 * The host's register of node roots (issue 30, "one root, one agent, host-wide"): one file per
 * root an agent serves, named by the root's device and inode, in a runtime directory every agent
 * of the host shares. The agent holds each of its entries with an exclusive flock for as long as
 * it serves the root, so an entry no process holds is a crashed agent's and counts for nothing.
 * A root is recognised by identity, never by name: another spelling, a bind mount or a directory
 * moved elsewhere is still the root it is.
 */

/** What an entry says: which root, node and process (for messages; the lock is what counts). */
export interface RegisteredRoot {
  root: string;
  node: string;
  pid: number;
  config: string;
  since: string;
}

/**
 * Where agents register their roots: DATUM_RUNTIME_DIR, else /run/datum for root (the packaged
 * unit's RuntimeDirectory), else $XDG_RUNTIME_DIR/datum, else <tmp>/datum-<uid>. Agents that are
 * to see each other must share it: every agent of a host runs with the same.
 */
export function runtimeDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.DATUM_RUNTIME_DIR) return path.resolve(env.DATUM_RUNTIME_DIR);
  const uid = process.getuid?.() ?? 0;
  if (uid === 0) return '/run/datum';
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, 'datum');
  return path.join(os.tmpdir(), `datum-${uid}`);
}

/** How long a registration waits out other agents' probes of its entry (lockExclusive's patience). */
const PROBE_PATIENCE_SECONDS = 5;

const rootsDir = () => path.join(runtimeDir(), 'roots');
const entryFile = (id: Identity) => path.join(rootsDir(), `${id.dev}-${id.ino}.json`);

/**
 * The entries this process registered and holds, by file. What they say is known here and their
 * holder is this process, so they are neither read nor probed: an agent taking its Nth root read
 * every entry it had written (N² reads for an agent of N nodes).
 */
const held = new Map<string, RegisteredRoot & { id: Identity }>();

/** Registers the root with identity `id` for this process: the entry, locked until the returned lock is released. Null when another process holds it. */
export async function registerRoot(id: Identity, entry: RegisteredRoot): Promise<HeldLock | null> {
  await fs.mkdir(rootsDir(), { recursive: true, mode: 0o755 });
  // Other agents probe entries (registeredRoots) as this one takes its own: it waits them out.
  const lock = await lockExclusive(entryFile(id), true, PROBE_PATIENCE_SECONDS);
  if (lock === null) return null;
  const text = `${JSON.stringify(entry, null, 2)}\n`;
  await lock.file.truncate(0);
  await lock.file.write(text, 0);
  held.set(lock.path, { ...entry, id });
  return lock;
}

/** Removes this process's entry (it holds its lock): a clean stop leaves the register as it found it. */
export async function unregisterRoot(lock: HeldLock): Promise<void> {
  held.delete(lock.path);
  await fs.rm(lock.path, { force: true });
  await lock.release();
}

/** The root registered at identity `id` by a live agent, or null (none, or the entry of one that died). */
export async function registeredAt(id: Identity): Promise<RegisteredRoot | null> {
  const file = entryFile(id);
  const mine = held.get(file);
  if (mine) return mine;
  // Cheap first: on every path of every observe, almost always no entry at all.
  if (!existsSync(file)) return null;
  if (!(await lockedByAnyone(file))) return null;
  return await readEntry(file);
}

/**
 * Entries already read, by file, for an agent taking many roots at once: the entries other
 * processes left (a crashed agent's stay until the host restarts) are read once for all of them,
 * not once per root. What decides is still the probe of an entry that matters, made each time.
 */
export type RegisterReads = Map<string, RegisteredRoot>;

/**
 * Every root registered by a live agent that `relevant` picks, with its identity. `relevant` runs
 * on what the entry says before its holder is probed: a probe is a flock(1) process, and an agent
 * taking N roots on a host of N roots probed every entry for each (N² processes: an agent of
 * 1000 nodes had not started after 5 minutes). Now it probes only the entries that matter, and
 * this process's own entries are taken from memory.
 */
export async function registeredRoots(
  relevant: (entry: RegisteredRoot & { id: Identity }) => boolean | Promise<boolean>,
  read: RegisterReads = new Map(),
): Promise<Array<RegisteredRoot & { id: Identity }>> {
  const names = await fs.readdir(rootsDir()).catch(() => [] as string[]);
  const out: Array<RegisteredRoot & { id: Identity }> = [];
  for (const name of names) {
    const m = /^(\d+)-(\d+)\.json$/.exec(name);
    if (!m) continue;
    const file = path.join(rootsDir(), name);
    const mine = held.get(file);
    if (mine) {
      if (await relevant(mine)) out.push(mine);
      continue;
    }
    // One being written as this reads it says nothing yet: it is read again next time, never kept empty.
    const entry = read.get(file) ?? (await readEntry(file));
    if (!entry) continue;
    read.set(file, entry);
    const found = { ...entry, id: { dev: Number(m[1]), ino: Number(m[2]) } };
    if ((await relevant(found)) && (await lockedByAnyone(file))) out.push(found);
  }
  return out;
}

async function readEntry(file: string): Promise<RegisteredRoot | null> {
  try {
    // Capped before reading: anyone who can write the runtime directory can put a file there.
    const text = (await readRegular(file, 64 * 1024)).bytes.toString('utf8');
    const e = JSON.parse(text) as Partial<RegisteredRoot>;
    return typeof e.root === 'string' && typeof e.node === 'string'
      ? { root: e.root, node: e.node, pid: Number(e.pid), config: String(e.config), since: String(e.since) }
      : null;
  } catch {
    return null;
  }
}

/** The identities of `dir`'s ancestors, nearest first, up to /. */
export async function ancestorIds(dir: string): Promise<Array<{ dir: string; id: Identity }>> {
  const out: Array<{ dir: string; id: Identity }> = [];
  for (let up = path.dirname(dir); ; up = path.dirname(up)) {
    const st = await fs.stat(up).catch(() => null);
    if (st) out.push({ dir: up, id: { dev: st.dev, ino: st.ino } });
    if (up === path.dirname(up)) return out;
  }
}

/** The identity of a directory now, or null when it is not one (moved, removed). */
export async function identityOf(dir: string): Promise<Identity | null> {
  const st = await fs.stat(dir).catch(() => null);
  return st?.isDirectory() ? { dev: st.dev, ino: st.ino } : null;
}
