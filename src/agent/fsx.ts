import { createHash, randomBytes } from 'node:crypto';
import { constants, createReadStream, promises as fs, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';

export function sha256(bytes: string | Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Reads a regular file without following a symlink at its last component, and returns its bytes
 * with the stat of the very inode they came from (so value and marker always agree).
 */
export async function readRegular(file: string): Promise<{ bytes: Buffer; st: Stats }> {
  const handle = await fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const st = await handle.stat();
    const bytes = await handle.readFile();
    return { bytes, st };
  } finally {
    await handle.close();
  }
}

export async function fsyncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export const tempName = (base: string) => `.${base}.datum-tmp-${process.pid}-${randomBytes(6).toString('hex')}`;

/**
 * Atomic replace: write a temp file in the same directory, fsync it, rename it over the target,
 * fsync the directory. A reader sees the old bytes or the new bytes, never a mix, and a crash
 * leaves at worst a stray temp file. rename() replaces a symlink rather than writing through it.
 */
export async function atomicWrite(file: string, data: string | Buffer, mode = 0o644): Promise<Stats> {
  const dir = path.dirname(file);
  const tmp = path.join(dir, tempName(path.basename(file)));
  const handle = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fsyncDir(dir);
  return await fs.lstat(file);
}

export async function atomicWriteJson(file: string, value: unknown): Promise<void> {
  await atomicWrite(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** A directory's entry names, unsorted; none when it is absent (or not a directory). */
export async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return [];
    throw err;
  }
}

export async function readJsonOrNull(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(
      `${file} is not valid JSON (${(err as Error).message}); it is Datum's own state: restore it from a backup or move it away`,
    );
  }
}

/** A timestamp usable in a file name, sortable, without ':' (2026-11-28T10-00-00-000Z). */
export const fileStamp = (at: Date) => at.toISOString().replace(/[:.]/g, '-');

// ---------------------------------------------------------------------------------------------
// Writing through held directories. Node has no openat(), but on Linux /proc/self/fd/<fd>/<name>
// is looked up inside the directory the descriptor holds, whatever its path is now. Opening each
// directory of a path in turn through its parent's descriptor, with O_NOFOLLOW, and creating,
// renaming and reading only through the last one, means that swapping a parent for a symlink
// after Datum checked the path can no longer redirect what it writes: the swap is either not
// seen (the descriptor holds the checked directory) or seen as a symlink and refused.

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** A directory held open; `at(name)` names an entry inside it, immune to later renames of its path. */
export class HeldDir {
  constructor(
    readonly handle: FileHandle,
    /** The path it was reached by, for messages only. */
    readonly shown: string,
  ) {}

  at(name: string): string {
    if (name === '' || name === '.' || name === '..' || name.includes('/'))
      throw new Error(`"${name}" is not a plain entry name`);
    return `/proc/self/fd/${this.handle.fd}/${name}`;
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}

/** Thrown when a directory of the path is (now) a symlink or not a directory at all. */
export class DirectorySwapped extends Error {
  constructor(readonly shown: string) {
    super(`"${shown}" is no longer a directory (it was replaced, perhaps by a symlink, while Datum was writing)`);
    this.name = 'DirectorySwapped';
  }
}

/**
 * Opens `root` (a real path) and then each of `segments` below it through its parent's
 * descriptor, never following a symlink; with `create`, a missing directory is made (mode 0755)
 * through its parent's descriptor too. The caller closes the returned directory.
 */
export async function openDirChain(root: string, segments: readonly string[], create: boolean): Promise<HeldDir> {
  let dir = new HeldDir(await fs.open(root, DIR_FLAGS), root);
  try {
    for (let i = 0; i < segments.length; i++) {
      const shown = segments.slice(0, i + 1).join('/');
      const next = await openChild(dir, segments[i], shown, create);
      await dir.close();
      dir = next;
    }
    return dir;
  } catch (err) {
    await dir.close().catch(() => undefined);
    throw err;
  }
}

async function openChild(parent: HeldDir, name: string, shown: string, create: boolean): Promise<HeldDir> {
  for (let attempt = 0; ; attempt++) {
    try {
      return new HeldDir(await fs.open(parent.at(name), DIR_FLAGS), shown);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ELOOP' || code === 'ENOTDIR') throw new DirectorySwapped(shown);
      if (code !== 'ENOENT' || !create || attempt > 0) throw err;
    }
    try {
      await fs.mkdir(parent.at(name), 0o755);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

/** lstat of an entry of a held directory; null when absent. */
export async function lstatAt(dir: HeldDir, name: string): Promise<Stats | null> {
  try {
    return await fs.lstat(dir.at(name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** readRegular of an entry of a held directory (O_NOFOLLOW on the entry). */
export async function readRegularAt(dir: HeldDir, name: string): Promise<{ bytes: Buffer; st: Stats }> {
  return await readRegular(dir.at(name));
}

/**
 * atomicWrite inside a held directory: temp file created there (O_EXCL|O_NOFOLLOW), fsynced,
 * renamed over `name` there, the directory fsynced. Returns the lstat of what the rename put in place.
 */
export async function atomicWriteAt(dir: HeldDir, name: string, data: string | Buffer, mode = 0o644): Promise<Stats> {
  const tmp = dir.at(tempName(name));
  const handle = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(tmp, dir.at(name));
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await dir.handle.sync();
  return await fs.lstat(dir.at(name));
}

/** Opens an entry of a held directory for appending, creating it, never through a symlink. */
export async function openAppendAt(dir: HeldDir, name: string, mode = 0o644): Promise<FileHandle> {
  return await fs.open(dir.at(name), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, mode);
}
