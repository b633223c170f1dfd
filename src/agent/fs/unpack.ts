import { constants, promises as fs } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { checkpoint } from './cancel';
import * as tar from 'tar';
import { openBelow, type HeldDir } from './held';
import { normalizeEntryPath, readFrom, type ArchiveSource } from './artifact';

/*
 * The archive is unpacked by Datum itself, one entry at a time, into a staging directory held
 * open. node-tar's own extraction writes by path: a directory of the tree swapped for a symlink
 * while it runs would send its writes out of the tree. Here each entry is created through the
 * held descriptor of its parent, reached from the staging directory without following a
 * symlink, and with O_EXCL: nothing outside the staging directory is written, and nothing inside
 * it is written twice. Only entries providers/artifact.ts's inspectArchive admitted are written.
 */

const FILE_TYPES = new Set(['File', 'OldFile', 'ContiguousFile']);

/**
 * Unpacks `file` (an archive inspectArchive admitted, with its allowed map) into the held
 * staging directory. Entries arrive one at a time (the parser waits for each to be consumed), so
 * each is written before the next is read.
 */
export async function extractInto(file: ArchiveSource, staging: HeldDir, allowed: Map<string, string>): Promise<void> {
  const parser = new tar.Parser({ strict: true });
  const source = readFrom(file);
  let chain: Promise<void> = Promise.resolve();
  const failure: { err: unknown } = { err: null };
  parser.on('entry', (entry: tar.ReadEntry) => {
    chain = chain
      .then(async () => {
        if (failure.err === null) await writeEntry(staging, entry, allowed);
        else entry.resume();
      })
      .catch((err: unknown) => {
        failure.err ??= err;
        entry.resume();
        source.destroy(err as Error);
      });
  });
  try {
    await pipeline(source, parser);
  } catch (err) {
    await chain;
    throw (failure.err ?? err) as Error;
  }
  await chain;
  if (failure.err !== null) throw failure.err as Error;
}

async function writeEntry(staging: HeldDir, entry: tar.ReadEntry, allowed: Map<string, string>): Promise<void> {
  const norm = normalizeEntryPath(entry.path).path;
  // The root entry, and anything inspection did not admit as this very type, is not written.
  if (norm === '' || allowed.get(norm) !== entry.type) return void entry.resume();
  // Still where it was made, up to the root: an unpack whose directory was moved or swapped
  // stops at the next entry (the install is refused at the rename anyway).
  staging.verifySync();
  const segments = norm.split('/');
  const name = segments.pop()!;
  const dir = await openBelow(staging, segments, true);
  try {
    const mode = (entry.mode ?? 0o644) & 0o777; // no setuid/setgid/sticky bits from an artifact
    if (entry.type === 'Directory') await makeDir(dir, name, mode | 0o700);
    else if (entry.type === 'SymbolicLink') await fs.symlink(entry.linkpath ?? '', dir.at(name));
    else if (entry.type === 'Link') await hardLink(staging, entry.linkpath ?? '', dir, name);
    else if (FILE_TYPES.has(entry.type)) return await writeFileEntry(dir, name, mode, entry);
    entry.resume();
  } finally {
    await dir.close();
  }
}

async function makeDir(dir: HeldDir, name: string, mode: number): Promise<void> {
  try {
    await fs.mkdir(dir.at(name), mode);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    // Made already as the parent of an earlier entry: it must be a directory (openBelow checks
    // that when the next entry goes into it).
  }
}

async function writeFileEntry(dir: HeldDir, name: string, mode: number, entry: tar.ReadEntry): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const handle = await fs.open(dir.at(name), flags, mode);
  try {
    for await (const chunk of entry as AsyncIterable<Buffer>) {
      checkpoint();
      await handle.write(chunk);
    }
    await handle.chmod(mode);
  } finally {
    await handle.close();
  }
}

/** A hardlink of the archive to an earlier entry of it, reached from the staging directory too. */
async function hardLink(staging: HeldDir, linkpath: string, dir: HeldDir, name: string): Promise<void> {
  const segments = normalizeEntryPath(linkpath).path.split('/');
  const target = segments.pop()!;
  const from = await openBelow(staging, segments, false);
  try {
    await fs.link(from.at(target), dir.at(name));
  } finally {
    await from.close();
  }
}
