import { createHash, randomBytes } from 'node:crypto';
import { constants, promises as fs, renameSync, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { withFix } from '../../contract';
import { FileTooLarge, NotRegularFile, readRegular, type HeldDir } from './held';
import { AgentRefusal } from '../refusal';
import { checkpoint } from './cancel';
import { bytes as sized, limits } from '../limits';

export function sha256(bytes: string | Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * The sha256 of an open file's bytes from its start, read a chunk at a time (never all in memory),
 * stopping when its activity's attempt is over. Callers cap what they hash before calling (an
 * artifact's size, checked while it streamed in): nothing node-controlled is hashed unbounded.
 */
export async function sha256Handle(handle: FileHandle): Promise<string> {
  const hash = createHash('sha256');
  const chunk = Buffer.allocUnsafe(1 << 20);
  for (let at = 0; ;) {
    checkpoint();
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, at);
    if (bytesRead === 0) return hash.digest('hex');
    hash.update(chunk.subarray(0, bytesRead));
    at += bytesRead;
  }
}

/**
 * A temp name beside `base`: hidden, marked as Datum's, unique. At most 100 bytes of `base` go
 * in, so a name as long as the filesystem allows (255 bytes) still has a temp name that fits.
 */
export const tempName = (base: string) =>
  `.${Buffer.from(base)
    .subarray(0, 100)
    .toString('utf8')
    .replace(/\uFFFD+$/, '')}.datum-tmp-${process.pid}-${randomBytes(6).toString('hex')}`;

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

/**
 * One of Datum's own JSON records in a held directory; null when absent. Anything there that is
 * not a regular file (a FIFO, a symlink, a socket) is refused without being read or waited on:
 * Datum only ever writes regular files there, so it is someone else's.
 */
export async function readJsonAt(dir: HeldDir, name: string, cap: number = limits.recordBytes): Promise<unknown> {
  const shown = `${dir.shown}/${name}`;
  let text: string;
  try {
    // Capped from fstat before reading: a record a local writer swapped for a huge sparse file is refused, not read.
    text = (await readRegular(dir.at(name), cap, shown)).bytes.toString('utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw stateRefusal(err, shown);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(
      `${shown} is not valid JSON (${(err as Error).message}); it is Datum's own state: restore it from a backup or move it away`,
    );
  }
}

/** A record of Datum's own that is not a regular file, or too large: refused, naming it. */
export function stateRefusal(err: unknown, shown: string): unknown {
  if (err instanceof NotRegularFile)
    return new AgentRefusal(
      'ProtectedAreaRefusal',
      withFix(
        `Datum's own record ${shown} is a ${err.kind}, not a regular file; Datum writes only regular files there, so it was not read`,
        `remove ${shown} (someone else put it there); the next pass writes it again`,
      ),
      { path: shown, kind: err.kind },
    );
  if (err instanceof FileTooLarge)
    return new AgentRefusal(
      'SizeLimitExceeded',
      withFix(
        `Datum's own record ${shown} holds ${sized(err.size)}, more than the ${sized(err.cap)} it reads of such a record (src/agent/limits.ts)`,
        `move ${shown} away; it is not a record Datum wrote`,
      ),
      { path: shown, size: err.size, cap: err.cap },
    );
  return err;
}

/** A timestamp usable in a file name, sortable, without ':' (2026-11-28T10-00-00-000Z). */
export const fileStamp = (at: Date) => at.toISOString().replace(/[:.]/g, '-');

/** Who should own a file Datum writes in place of another: the replaced one's owner, group and mode. */
export interface Ownership {
  uid: number;
  gid: number;
  mode: number;
}

/**
 * Writes `data` to a new temp file in the held directory (O_EXCL|O_NOFOLLOW), with `own`'s owner
 * and group and its mode, fsynced. The owner and group are the replaced file's where the agent
 * may give them (root may; another user keeps its own); declared ones (`required`) are given or
 * refused, never quietly left. Returns the temp file's name; the caller renames or removes it.
 */
export async function writeTemp(
  dir: HeldDir,
  name: string,
  data: string | Buffer,
  own: Partial<Ownership> = {},
  required = false,
): Promise<string> {
  const tmp = tempName(name);
  const mode = (own.mode ?? 0o644) & 0o777;
  const handle = await fs.open(
    dir.at(tmp),
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    mode,
  );
  try {
    await handle.writeFile(data);
    // Owner and group before the mode: a chown clears bits the mode then sets exactly.
    if (own.uid !== undefined || own.gid !== undefined) await chownIfAllowed(handle, own.uid ?? -1, own.gid ?? -1, required);
    await handle.chmod(mode); // exactly the mode, whatever the umask
    await handle.sync();
  } catch (err) {
    await handle.close();
    await fs.rm(dir.at(tmp), { force: true });
    throw err;
  } finally {
    await handle.close().catch(() => undefined);
  }
  return tmp;
}

/** chown (-1: leave that one); EPERM ignored unless `required`, when it is the host's refusal. */
async function chownIfAllowed(handle: FileHandle, uid: number, gid: number, required: boolean): Promise<void> {
  const st = await handle.stat();
  if ((uid === -1 || st.uid === uid) && (gid === -1 || st.gid === gid)) return;
  try {
    await handle.chown(uid, gid);
  } catch (err) {
    // Only root gives a file away; an agent running as a user keeps what it writes as its own.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') throw err;
    if (required) throw notPermitted('give the file', { uid, gid });
  }
}

/** The kernel's EPERM on a chown or chmod the agent was asked to make: the host does not let this agent do it. */
export function notPermitted(what: string, facts: { uid?: number; gid?: number; mode?: number }): AgentRefusal {
  const asked = [
    ...(facts.uid !== undefined && facts.uid !== -1 ? [`owner ${facts.uid}`] : []),
    ...(facts.gid !== undefined && facts.gid !== -1 ? [`group ${facts.gid}`] : []),
    ...(facts.mode !== undefined ? [`mode ${facts.mode.toString(8).padStart(4, '0')}`] : []),
  ].join(', ');
  return new AgentRefusal(
    'NotAllowedByHost',
    withFix(
      `the kernel does not let the agent (uid ${process.getuid?.() ?? '?'}) ${what} ${asked} (EPERM): only root gives an inode to another owner, or to a group its user is not in`,
      'run the agent as root on this host, or declare only an owner and group the agent may give (its own user, a group it is in)',
    ),
    { uid: facts.uid ?? null, gid: facts.gid ?? null, agent_uid: process.getuid?.() ?? null },
  );
}

/**
 * Atomic replace inside a held directory: temp file, fsync, and, right after verifying that the
 * directory is still where it was checked, rename over `name`, then fsync the directory. A reader
 * sees the old bytes or the new bytes, never a mix; rename() replaces a symlink rather than
 * writing through it. Returns the lstat of what the rename put in place.
 */
export async function atomicWriteAt(dir: HeldDir, name: string, data: string | Buffer, mode = 0o644): Promise<Stats> {
  const tmp = await writeTemp(dir, name, data, { mode });
  try {
    dir.verifySync();
    renameSync(dir.at(tmp), dir.at(name));
  } catch (err) {
    await fs.rm(dir.at(tmp), { force: true });
    throw err;
  }
  await dir.handle.sync();
  return await fs.lstat(dir.at(name));
}

export async function writeJsonAt(dir: HeldDir, name: string, value: unknown): Promise<void> {
  await atomicWriteAt(dir, name, `${JSON.stringify(value, null, 2)}\n`);
}

/** Opens an entry of a held directory for appending, creating it, never through a symlink. */
export async function openAppendAt(dir: HeldDir, name: string, mode = 0o644): Promise<FileHandle> {
  const flags = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  const handle = await fs.open(dir.at(name), flags, mode);
  if (await isSoleRegular(handle)) return handle;
  // Another name shares the inode (a hard link made to a file elsewhere), or it is no regular file:
  // appending would write into someone else's file. Drop this name, not the other file, and start afresh.
  await handle.close();
  await fs.unlink(dir.at(name));
  return await fs.open(dir.at(name), flags | constants.O_EXCL, mode);
}

/** A regular file with this one name: appending to it or truncating it touches nothing else. */
export async function isSoleRegular(handle: FileHandle): Promise<boolean> {
  const st = await handle.stat();
  return st.isFile() && st.nlink === 1;
}

// src/agent/services.ts reads its records through these until it moves to held directories too.
export { type HeldDir } from './held';

/**
 * How long after its last change a file's stamp is trusted to name its content: a write within
 * the same timestamp tick (a jiffy on ext4, a second on some filesystems) keeps the size and
 * times, so a stamp taken that soon may name content that was replaced (git's racy-clean rule).
 */
const SETTLE_MS = 2_000;

/**
 * A file's content stamp (device, inode, size, modification and change times in nanoseconds, following
 * symlinks), and whether it has settled (last changed SETTLE_MS ago or more); null when it
 * cannot be stat'ed. A change of content changes the stamp, except within an unsettled one.
 */
export async function contentStamp(file: string): Promise<{ stamp: string; settled: boolean } | null> {
  const st = await fs.stat(file, { bigint: true }).catch(() => null);
  if (st === null) return null;
  const changed = st.ctimeNs > st.mtimeNs ? st.ctimeNs : st.mtimeNs;
  return {
    stamp: `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`,
    settled: BigInt(Date.now()) * 1_000_000n - changed >= BigInt(SETTLE_MS) * 1_000_000n,
  };
}
