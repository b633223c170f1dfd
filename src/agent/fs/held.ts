import { constants, promises as fs, lstatSync, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { checkpoint } from './cancel';

/*
 * Filesystem work beneath a node root that another process may reshape at any moment.
 *
 * Node has no openat(), but on Linux /proc/self/fd/<fd>/<name> is looked up inside the directory
 * the descriptor holds, whatever its path is now. Each directory of a path is opened in turn
 * through its parent's descriptor with O_NOFOLLOW, and every create, rename and read goes through
 * the last one: swapping a directory for a symlink after Datum checked it is either not seen (the
 * descriptor holds the checked directory) or seen as a symlink and refused.
 *
 * A held descriptor follows its directory if the directory itself is renamed, even out of the
 * root. So the chain keeps every level open and, right before an irreversible step (a rename, a
 * link), `verifySync` checks that each level is still the entry of its parent it was opened as
 * (device and inode): the step lands in the directory that is at its checked place at that
 * moment. The check and the step are synchronous calls back to back, a few microseconds apart;
 * README "Safety model" says what can still land in between.
 *
 * Reads open non-blocking and refuse anything that is not a regular file before reading a byte:
 * a FIFO planted where Datum expects a file would otherwise hold a thread of libuv's pool (four,
 * shared by every node the process serves) for good.
 */

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** open(2) flags for the agent's own records: never through a symlink at the last name. */
export const OPEN_FLAGS = {
  /** An existing file, to read and write in place (a log to rotate). */
  readWrite: constants.O_RDWR | constants.O_NOFOLLOW,
  /** A new file only: EEXIST when anything is there. */
  createNew: constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
} as const;

/** Where an inode is: its device and inode number. */
export interface Identity {
  dev: number;
  ino: number;
}

export const sameIdentity = (a: Identity, b: Identity) => a.dev === b.dev && a.ino === b.ino;

/** Thrown when a directory of the path is (now) a symlink, not a directory, or not where it was. */
export class DirectorySwapped extends Error {
  constructor(readonly shown: string) {
    super(
      `"${shown}" is no longer the directory Datum checked (it was replaced or moved, perhaps for a symlink, while Datum was working)`,
    );
    this.name = 'DirectorySwapped';
  }
}

/** Thrown by the reads below for an entry that is not a regular file (never read, never waited on). */
export class NotRegularFile extends Error {
  constructor(
    readonly shown: string,
    readonly kind: string,
  ) {
    super(`"${shown}" is a ${kind}, not a regular file`);
    this.name = 'NotRegularFile';
  }
}

/** Thrown by the reads below for a regular file larger than the cap the caller gave. */
export class FileTooLarge extends Error {
  constructor(
    readonly shown: string,
    readonly size: number,
    readonly cap: number,
  ) {
    super(`"${shown}" holds ${size} bytes, more than the ${cap} Datum reads there`);
    this.name = 'FileTooLarge';
  }
}

type Reached = { parent: HeldDir; name: string } | { path: string };

/** A directory held open; `at(name)` names an entry inside it, immune to later renames of its path. */
export class HeldDir {
  private constructor(
    readonly handle: FileHandle,
    /** The path it was reached by, for messages only. */
    readonly shown: string,
    readonly id: Identity,
    private readonly reached: Reached,
    /** The directories above it that closing this one closes too. */
    private readonly owned: HeldDir[],
    /** A second name for a directory someone else holds: closing it closes nothing. */
    private readonly borrowed = false,
  ) {}

  /** Opens a directory by its (real) path, never through a symlink at its last component. */
  static async open(dir: string): Promise<HeldDir> {
    const handle = await openDir(dir, dir);
    return new HeldDir(handle, dir, await idOf(handle), { path: dir }, []);
  }

  /**
   * Opens the directory `name` inside this one, never through a symlink; with `create`, makes it
   * first (mode 0755) when absent. Closing the child leaves this one open; this one must stay
   * open while the child is used (its checks go through it).
   */
  async child(name: string, create: boolean, shown = name): Promise<HeldDir> {
    for (let attempt = 0; ; attempt++) {
      try {
        const handle = await openDir(this.at(name), shown);
        return new HeldDir(handle, shown, await idOf(handle), { parent: this, name }, []);
      } catch (err) {
        if (!isCode(err, 'ENOENT') || !create || attempt > 0) throw err;
      }
      try {
        await fs.mkdir(this.at(name), 0o755);
      } catch (err) {
        if (!isCode(err, 'EEXIST')) throw err;
      }
    }
  }

  at(name: string): string {
    if (name === '' || name === '.' || name === '..' || name.includes('/'))
      throw new Error(`"${name}" is not a plain entry name`);
    return `/proc/self/fd/${this.handle.fd}/${name}`;
  }

  /** Removes the entry `name` when it is there; a symlink there is removed itself, never followed. */
  async remove(name: string): Promise<void> {
    await fs.rm(this.at(name), { force: true });
  }

  /** Opens the entry `name` with open(2) `flags` (add O_NOFOLLOW to refuse a symlink there). */
  async open(name: string, flags: number, mode = 0o644): Promise<FileHandle> {
    return await fs.open(this.at(name), flags, mode);
  }

  /** Creates the directory `name` (EEXIST when something is there). */
  async mkdir(name: string, mode = 0o755): Promise<void> {
    await fs.mkdir(this.at(name), mode);
  }

  /** The target of the symlink `name`. */
  async readlink(name: string): Promise<string> {
    return await fs.readlink(this.at(name));
  }

  /** The names of its entries, unsorted. */
  async entries(): Promise<string[]> {
    return await fs.readdir(`/proc/self/fd/${this.handle.fd}`);
  }

  /**
   * Throws DirectorySwapped unless this directory, and each one above it up to the one opened
   * by path, is still the entry (same device and inode) of its parent that it was opened as.
   * Synchronous on purpose: called right before an irreversible step, so nothing of the agent's
   * own runs in between.
   */
  verifySync(): void {
    const where = 'parent' in this.reached ? this.reached.parent.at(this.reached.name) : this.reached.path;
    const now = lstatSync(where, { throwIfNoEntry: false });
    if (!now || !now.isDirectory() || !sameIdentity(now, this.id)) throw new DirectorySwapped(this.shown);
    if ('parent' in this.reached) this.reached.parent.verifySync();
  }

  async close(): Promise<void> {
    if (this.borrowed) return;
    await this.handle.close().catch(() => undefined);
    for (const up of [...this.owned].reverse()) await up.handle.close().catch(() => undefined);
  }

  /** This directory, owning `above` (closed with it). */
  adopt(above: HeldDir[]): HeldDir {
    return new HeldDir(this.handle, this.shown, this.id, this.reached, [...above]);
  }

  /** This directory under a second name whose close() leaves it open. */
  view(): HeldDir {
    return new HeldDir(this.handle, this.shown, this.id, this.reached, [], true);
  }
}

async function openDir(where: string, shown: string): Promise<FileHandle> {
  try {
    return await fs.open(where, DIR_FLAGS);
  } catch (err) {
    if (isCode(err, 'ELOOP') || isCode(err, 'ENOTDIR')) throw new DirectorySwapped(shown);
    throw err;
  }
}

async function idOf(handle: FileHandle): Promise<Identity> {
  const st = await handle.stat();
  return { dev: st.dev, ino: st.ino };
}

/**
 * Opens `root` (a real path) and then each of `segments` below it through its parent's
 * descriptor, never following a symlink; with `create`, a missing directory is made (mode 0755)
 * through its parent's descriptor too. Every level stays open (for verifySync) until the caller
 * closes the returned directory.
 */
export async function openDirChain(root: string, segments: readonly string[], create: boolean): Promise<HeldDir> {
  const chain: HeldDir[] = [await HeldDir.open(root)];
  try {
    for (let i = 0; i < segments.length; i++)
      chain.push(await chain[i].child(segments[i], create, segments.slice(0, i + 1).join('/')));
    const last = chain.pop()!;
    return last.adopt(chain);
  } catch (err) {
    for (const dir of chain.reverse()) await dir.close();
    throw err;
  }
}

/**
 * Opens each of `segments` below `base` in turn (as openDirChain does below a root); the returned
 * directory owns the levels it opened, not `base`, which must stay open while it is used.
 */
export async function openBelow(base: HeldDir, segments: readonly string[], create: boolean): Promise<HeldDir> {
  if (segments.length === 0) return base.view();
  const chain: HeldDir[] = [];
  try {
    for (const name of segments) chain.push(await (chain.at(-1) ?? base).child(name, create, `${base.shown}/${name}`));
    const last = chain.pop()!;
    return last.adopt(chain);
  } catch (err) {
    for (const dir of chain.reverse()) await dir.close();
    throw err;
  }
}

/**
 * Removes the entry `name` of a held directory and, when it is a directory, everything in it,
 * one held directory at a time: an entry swapped for a symlink meanwhile is unlinked itself,
 * never followed (a path-based recursive remove would follow it out of the tree).
 */
export async function removeTree(parent: HeldDir, name: string): Promise<void> {
  const st = await lstatAt(parent, name);
  if (st === null) return;
  if (st.isDirectory()) {
    let dir: HeldDir | null = null;
    try {
      dir = await parent.child(name, false);
    } catch (err) {
      if (!(err instanceof DirectorySwapped) && !isCode(err, 'ENOENT')) throw err;
    }
    if (dir !== null) {
      try {
        for (const entry of await dir.entries()) await removeTree(dir, entry);
      } finally {
        await dir.close();
      }
      await fs.rmdir(parent.at(name)).catch((err: unknown) => {
        if (!isCode(err, 'ENOENT')) throw err;
      });
      return;
    }
  }
  await fs.unlink(parent.at(name)).catch((err: unknown) => {
    if (!isCode(err, 'ENOENT')) throw err;
  });
}

/** lstat of an entry of a held directory; null when absent. */
export async function lstatAt(dir: HeldDir, name: string): Promise<Stats | null> {
  try {
    return await fs.lstat(dir.at(name));
  } catch (err) {
    if (isCode(err, 'ENOENT')) return null;
    throw err;
  }
}

/**
 * Opens a regular file for reading without following a symlink at its last component and
 * without blocking (a FIFO opens at once and is refused); NotRegularFile for anything else.
 */
export async function openRegular(file: string, shown = file, follow = false): Promise<{ handle: FileHandle; st: Stats }> {
  let handle: FileHandle;
  try {
    handle = await fs.open(file, follow ? READ_FLAGS & ~constants.O_NOFOLLOW : READ_FLAGS);
  } catch (err) {
    if (isCode(err, 'ELOOP')) throw new NotRegularFile(shown, 'symlink');
    throw err;
  }
  const st = await handle.stat().catch(async (err: unknown) => {
    await handle.close();
    throw err;
  });
  if (!st.isFile()) {
    await handle.close();
    throw new NotRegularFile(shown, kindOfStats(st));
  }
  return { handle, st };
}

/**
 * A regular file's bytes with the stat of the very inode they came from (so value and marker
 * always agree); FileTooLarge past `cap` bytes, judged before reading and again while reading
 * (a file that grows meanwhile is not read without end).
 */
export async function readRegular(
  file: string,
  cap = Number.MAX_SAFE_INTEGER,
  shown = file,
  follow = false,
): Promise<{ bytes: Buffer; st: Stats }> {
  const { handle, st } = await openRegular(file, shown, follow);
  try {
    if (st.size > cap) throw new FileTooLarge(shown, st.size, cap);
    return { bytes: await readAll(handle, cap, shown), st };
  } finally {
    await handle.close();
  }
}

/** Reads an open file from its start, at most `cap` bytes (FileTooLarge past it). */
export async function readAll(handle: FileHandle, cap: number, shown: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    checkpoint();
    const chunk = Buffer.allocUnsafe(Math.min(1 << 20, cap - total + 1));
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, total);
    if (bytesRead === 0) return Buffer.concat(chunks, total);
    total += bytesRead;
    if (total > cap) throw new FileTooLarge(shown, total, cap);
    chunks.push(chunk.subarray(0, bytesRead));
  }
}

export function kindOfStats(st: {
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
}): string {
  if (st.isFile()) return 'regular file';
  if (st.isDirectory()) return 'directory';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isFIFO()) return 'FIFO';
  if (st.isSocket()) return 'socket';
  return 'device file';
}

export function isCode(err: unknown, code: string): boolean {
  return err instanceof Error && (err as NodeJS.ErrnoException).code === code;
}
