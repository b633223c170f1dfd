import os from 'node:os';
import path from 'node:path';
import {
  DirectorySwapped,
  FileTooLarge,
  HeldDir,
  NotRegularFile,
  checkFileResourcePath,
  isErrno,
  lstatAt,
  locateIn,
  readLocated,
  readRegular,
  sha256,
} from '../fs';
import { limits } from '../limits';
import { ABSENT_MARKER, fileMarker, linkMarker } from '../markers';
import { AgentRefusal } from '../refusal';
import type { AgentConfig } from '../../schemas';
import type { Manager } from './systemctl';

/*
 * The files a unit's evidence is read from: Datum's own unit file or drop-in in the units
 * directory (outside the node root, reached through held descriptors), and the node's files the
 * unit's process loads (restart_on, under the root). Each is read once per observe, with the time
 * its bytes came to be at their path: its ctime, not its mtime. A rename sets the ctime of the
 * renamed file (an atomic write's content appears at the swap, after the temp file's mtime), and
 * no writer can set a ctime back, so "the process started after this ctime" means it started
 * after these bytes were in place.
 */

/** Where the host keeps the unit files Datum owns, and where that comes from (said in every observation). */
export interface UnitsDir {
  manager: Manager;
  dir: string;
  from: string;
}

export function unitsDir(config: AgentConfig | undefined): UnitsDir {
  const units = config?.units ?? { manager: 'system' as const };
  if (units.directory !== undefined) return { manager: units.manager, dir: units.directory, from: 'units.directory' };
  if (units.manager === 'system')
    return { manager: 'system', dir: '/etc/systemd/system', from: "the system manager's directory for local units" };
  const xdg = process.env.XDG_CONFIG_HOME;
  if (xdg !== undefined && path.isAbsolute(xdg))
    return { manager: 'user', dir: path.join(xdg, 'systemd/user'), from: "$XDG_CONFIG_HOME of the agent's environment" };
  return { manager: 'user', dir: path.join(os.homedir(), '.config/systemd/user'), from: "the agent user's ~/.config" };
}

/** A file as read for evidence: its digest, the time its bytes were in place (µs), and its marker. */
export interface Read {
  sha256: string;
  placedUs: number;
  marker: string;
}

/** Not a regular file where Datum's file should be: writing would replace it, so it is in the way. */
export interface InTheWay {
  kind: string;
  marker: string;
}

const ctimeUs = (st: { ctimeMs: number }) => Math.floor(st.ctimeMs * 1000);

/** Datum's own file of the unit (`rel` under the units directory): read, absent, or something else in the way. */
export async function readOwnFile(units: UnitsDir, rel: string): Promise<Read | 'absent' | InTheWay> {
  const parts = rel.split('/');
  let dir: HeldDir;
  try {
    dir = await HeldDir.open(units.dir);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return 'absent';
    throw err;
  }
  try {
    if (parts.length === 2) {
      const sub = await openChild(dir, parts[0]);
      if (sub === null) return 'absent';
      if ('kind' in sub) return sub;
      try {
        return await readEntry(sub, parts[1], rel);
      } finally {
        await sub.close();
      }
    }
    return await readEntry(dir, rel, rel);
  } finally {
    await dir.close();
  }
}

/** The drop-in directory, when it is one; a symlink or a file there is in the way (never followed). */
async function openChild(dir: HeldDir, name: string): Promise<HeldDir | InTheWay | null> {
  const st = await lstatAt(dir, name);
  if (st === null) return null;
  if (!st.isDirectory())
    return {
      kind: st.isSymbolicLink() ? 'symlink' : 'file',
      marker: st.isSymbolicLink() ? linkMarker(await dir.readlink(name), st.ctimeMs) : fileMarker(st),
    };
  try {
    return await dir.child(name, false);
  } catch (err) {
    if (err instanceof DirectorySwapped) return { kind: 'directory replaced while read', marker: fileMarker(st) };
    if (isErrno(err, 'ENOENT')) return null;
    throw err;
  }
}

async function readEntry(dir: HeldDir, name: string, shown: string): Promise<Read | 'absent' | InTheWay> {
  const st = await lstatAt(dir, name);
  if (st === null) return 'absent';
  if (st.isSymbolicLink()) {
    const target = await dir.readlink(name);
    return { kind: `symlink to ${target}`, marker: linkMarker(target, st.ctimeMs) };
  }
  try {
    const read = await readRegular(dir.at(name), limits.backupBytes, shown);
    const digest = sha256(read.bytes);
    return { sha256: digest, placedUs: ctimeUs(read.st), marker: fileMarker(read.st, digest) };
  } catch (err) {
    if (err instanceof NotRegularFile) return { kind: err.kind, marker: fileMarker(st) };
    if (err instanceof FileTooLarge)
      return { kind: `file of ${err.size} bytes, more than Datum keeps a backup of`, marker: fileMarker(st) };
    if (isErrno(err, 'ENOENT')) return 'absent';
    throw err;
  }
}

/** The absolute path of Datum's own file, as the manager names it in FragmentPath and DropInPaths. */
export const ownPath = (units: UnitsDir, rel: string) => path.join(units.dir, rel);

/** The marker part of Datum's own file: its file marker (with its digest), a link's, or absent. */
export const ownMarker = (read: Read | 'absent' | InTheWay | null): string =>
  read === null ? 'none' : read === 'absent' ? ABSENT_MARKER : read.marker;

/** A restart_on file under the node root: read as the file resource is, or why it could not be. */
export async function readNodeFile(root: string, rel: string | null): Promise<Read | { problem: string }> {
  if (rel === null) return { problem: 'names no file resource of this desired state' };
  try {
    checkFileResourcePath(rel);
    const loc = await locateIn(root, rel, 'file path', null);
    const read = await readLocated(root, loc, rel, 'file path', (entry) => readRegular(entry, limits.backupBytes, rel));
    if (read === null) return { problem: `${rel} is not there` };
    const digest = sha256(read.bytes);
    return { sha256: digest, placedUs: ctimeUs(read.st), marker: fileMarker(read.st, digest) };
  } catch (err) {
    const errno = typeof (err as NodeJS.ErrnoException).code === 'string';
    if (err instanceof AgentRefusal || err instanceof NotRegularFile || err instanceof FileTooLarge || errno)
      return { problem: `${rel} could not be read (${(err as Error).message})` };
    throw err;
  }
}
