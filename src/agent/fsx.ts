import { createHash, randomBytes } from 'node:crypto';
import { constants, createReadStream, promises as fs, type Stats } from 'node:fs';
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
