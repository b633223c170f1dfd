import { linkSync, lstatSync, promises as fs, renameSync, unlinkSync, type Stats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { withFix } from '../../contract';
import { atomicWriteAt, fileStamp, sha256, writeTemp } from './files';
import { NotRegularFile, isCode, lstatAt, openRegular, readAll, type HeldDir } from './held';
import { bytes as sized, limits } from '../limits';
import { ABSENT_MARKER, fileMarker, sameMarker } from '../markers';
import { kindOf, locateIn, openLocatedDir } from './paths';
import { AgentRefusal } from '../refusal';
import type { CheckedMarker } from '../markers';
import type { Wanted } from './attributes';

/*
 * Replacing a regular file (a file resource, a flag) so that no other writer's change is lost in
 * any window Node can close:
 *
 *   1. open what is there (never through a symlink, never blocking on a FIFO), read it, and
 *      compare it with the marker the agent's re-check just saw: a change since is MARKER_MOVED;
 *   2. keep the very inode about to be replaced under .datum/backup/ by a hard link (a copy when
 *      the backup area is on another device or the link is not allowed): a writer still writing
 *      into it in place writes into the backup;
 *   3. write the new bytes to a temp file beside it, with the replaced file's owner, group and mode
 *      (those a file resource declares instead, set before the rename);
 *   4. the last check, then the swap, back to back and synchronous: the directory is still where
 *      it was checked, the entry is still the inode of step 1 unchanged since step 2 (inode,
 *      ctime, mtime, size), rename;
 *   5. after the swap, read the replaced inode again: a change that landed in it between the last
 *      check and the swap is MARKER_MOVED, its content kept in the backup and named in the refusal.
 *
 * A target that is absent is created with link(), which fails when anything appeared there
 * meanwhile: that window is closed outright. What stays open is a rename by another writer
 * between step 4's check and its rename (renameat2's RENAME_EXCHANGE would close it, and Node has
 * no way to call it): README "Safety model" says how small that is.
 */

/**
 * A test seam, inert unless a test sets it: told the span (monotonic clock, shared by every
 * process of the machine) from the last check's lstat to the return of the rename, per target.
 * The filesystem adversary (test/fuzz/fs-adversary.test.ts) measures that window with it, and
 * accepts a lost change only when the other writer's rename provably landed inside it.
 */
let swapProbe: ((target: string, from: bigint, to: bigint) => void) | null = null;

export function probeSwapsForTests(probe: typeof swapProbe): void {
  swapProbe = probe;
}

export interface Replacing {
  /** What is written, for messages: a file or flag resource, or Datum's own file of a unit. */
  type: 'file' | 'flag' | 'unit';
  /** As desired state spells it, for messages. */
  rel: string;
  /** The resolved path under the root: one backup history per target however it is spelled. */
  target: string;
  /**
   * The mode, owner and group a file declares: the new inode has them before it is renamed into
   * place (never the wrong mode for a moment), and an owner the agent may not give is refused.
   * What it does not declare is the replaced file's (a new file's: 0644, the agent's own).
   */
  want?: Wanted;
}

export interface Replaced {
  previous: { size: number; backup: string } | null;
  /** The lstat of what the swap put in place, and the sha256 of its bytes: the marker our write left. */
  st: Stats;
  sha256: string;
}

/** Replaces (or creates) `name` in the held directory with `content`, as above. */
export async function replaceIn(
  root: string,
  dir: HeldDir,
  name: string,
  at: Replacing,
  content: string,
  checked: CheckedMarker,
  now: () => Date,
): Promise<Replaced> {
  const st = await lstatAt(dir, name);
  if (st !== null && !st.isFile()) throw notRegular(at, kindOf(st));
  if (st === null) {
    if (typeof checked === 'string' && checked !== ABSENT_MARKER) throw movedBeforeSwap(at, checked, ABSENT_MARKER);
    return await createIn(dir, name, at, content);
  }
  let opened: { handle: FileHandle; st: Stats };
  try {
    opened = await openRegular(dir.at(name), at.rel);
  } catch (err) {
    if (err instanceof NotRegularFile) throw notRegular(at, err.kind);
    if (isCode(err, 'ENOENT')) throw movedBeforeSwap(at, checked ?? null, ABSENT_MARKER);
    throw err;
  }
  try {
    return await swapIn(root, dir, name, at, content, checked, opened, now);
  } finally {
    await opened.handle.close();
  }
}

/** Nothing was there: link() the new file into place, which fails if anything appeared meanwhile. */
async function createIn(dir: HeldDir, name: string, at: Replacing, content: string): Promise<Replaced> {
  const tmp = await writeTemp(dir, name, content, at.want, declaresOwner(at.want));
  try {
    dir.verifySync();
    linkSync(dir.at(tmp), dir.at(name));
  } catch (err) {
    await fs.rm(dir.at(tmp), { force: true });
    if (!isCode(err, 'EEXIST')) throw err;
    const now = await lstatAt(dir, name);
    throw movedBeforeSwap(at, ABSENT_MARKER, now ? fileMarker(now) : ABSENT_MARKER);
  }
  unlinkSync(dir.at(tmp));
  await dir.handle.sync();
  return { previous: null, st: await fs.lstat(dir.at(name)), sha256: sha256(content) };
}

async function swapIn(
  root: string,
  dir: HeldDir,
  name: string,
  at: Replacing,
  content: string,
  checked: CheckedMarker,
  opened: { handle: FileHandle; st: Stats },
  now: () => Date,
): Promise<Replaced> {
  const { handle, st: seen } = opened;
  // 1. What is about to be replaced is what the re-check saw.
  if (seen.size > limits.backupBytes) throw tooLargeToKeep(at, seen.size);
  const before = await readAll(handle, limits.backupBytes, at.rel);
  const digest = sha256(before);
  const found = fileMarker(seen, digest);
  if (typeof checked === 'string' && !sameMarker(found, checked)) throw movedBeforeSwap(at, checked, found);
  // 2. Keep it.
  const backup = await keepBackup(root, dir, name, at, { seen, bytes: before, found }, now);
  try {
    // 3. The new bytes beside it, owned as it was unless the file declares otherwise.
    const own = { uid: at.want?.uid ?? seen.uid, gid: at.want?.gid ?? seen.gid, mode: at.want?.mode ?? seen.mode };
    const tmp = await writeTemp(dir, name, content, own, declaresOwner(at.want));
    const kept = await handle.stat(); // the link moved its ctime: this is the state to hold
    // Written into since step 1 (its ctime moved with our link, its mtime and size did not): nothing is replaced.
    if (kept.mtimeMs !== seen.mtimeMs || kept.size !== seen.size) {
      await fs.rm(dir.at(tmp), { force: true });
      await backup.forget();
      throw movedBeforeSwap(at, found, fileMarker(kept));
    }
    // 4. The last check and the swap.
    try {
      dir.verifySync();
      const from = process.hrtime.bigint();
      const last = lstatSync(dir.at(name), { throwIfNoEntry: false });
      if (!last || !unchanged(last, kept)) throw movedBeforeSwap(at, found, last ? fileMarker(last) : ABSENT_MARKER);
      renameSync(dir.at(tmp), dir.at(name));
      swapProbe?.(at.target, from, process.hrtime.bigint());
    } catch (err) {
      await fs.rm(dir.at(tmp), { force: true });
      await backup.forget(); // nothing was replaced: the backup is of nothing
      throw err;
    }
    await dir.handle.sync();
    // 5. Anything written into the replaced inode in between is kept and reported.
    await changedDuringSwap(dir, name, at, { handle, kept, digest, found }, backup);
    await backup.prune();
  } finally {
    await backup.close();
  }
  return {
    previous: { size: before.length, backup: backup.rel },
    st: await fs.lstat(dir.at(name)),
    sha256: sha256(content),
  };
}

/** What an approved removal did with one target: its bytes, and where they are kept now. */
export interface Removed {
  size: number;
  sha256: string;
  /** Under .datum/backup/: the removed inode itself (a hard link), or a copy of its bytes. */
  backup: string;
}

/**
 * Removes `name` from the held directory as an approved planned removal does (src/agent/activities/
 * removal.ts), never losing its bytes: what is there must be the regular file with the marker the
 * plan saw; it is kept as .datum/backup/<target>.removed.<time> (a second name of the very inode,
 * or a copy), which backup pruning never takes; then, at the last check, back to back with it, the
 * name is unlinked. A change found on the way removes nothing (MARKER_MOVED).
 */
export async function removeIn(
  root: string,
  dir: HeldDir,
  name: string,
  at: Replacing,
  seenByPlan: { marker: string; sha256: string },
  now: () => Date,
): Promise<Removed> {
  const planned = seenByPlan.marker;
  const st = await lstatAt(dir, name);
  if (st === null) throw movedBeforeRemoval(at, planned, ABSENT_MARKER);
  if (!st.isFile()) throw movedBeforeRemoval(at, planned, `a ${kindOf(st)}`);
  const { handle, st: seen } = await openRegular(dir.at(name), at.rel);
  let backup: Backup | null = null;
  try {
    if (seen.size > limits.backupBytes) throw tooLargeToKeep(at, seen.size);
    const bytes = await readAll(handle, limits.backupBytes, at.rel);
    const digest = sha256(bytes);
    const found = fileMarker(seen, digest);
    if (!sameMarker(found, planned) || digest !== seenByPlan.sha256) throw movedBeforeRemoval(at, planned, found);
    backup = await keepBackup(root, dir, name, at, { seen, bytes, found }, now, 'removed.');
    const kept = await handle.stat();
    try {
      if (kept.mtimeMs !== seen.mtimeMs || kept.size !== seen.size) throw movedBeforeRemoval(at, found, fileMarker(kept));
      dir.verifySync();
      const last = lstatSync(dir.at(name), { throwIfNoEntry: false });
      if (!last || !unchanged(last, kept)) throw movedBeforeRemoval(at, found, last ? fileMarker(last) : ABSENT_MARKER);
      unlinkSync(dir.at(name));
    } catch (err) {
      await backup.forget();
      throw err;
    }
    await dir.handle.sync();
    // Written into between the last check and the unlink: a copy keeps that too (a link already holds it).
    const after = await handle.stat();
    if (after.mtimeMs !== kept.mtimeMs || after.size !== kept.size)
      await backup.keepAlso(await readAll(handle, Math.max(limits.backupBytes, after.size), at.rel), after);
    return { size: bytes.length, sha256: digest, backup: backup.rel };
  } finally {
    await backup?.close();
    await handle.close();
  }
}

/** Found other than the plan saw at the removal's last look: nothing was removed. */
function movedBeforeRemoval(at: Replacing, planned: string, now: string): AgentRefusal {
  return new AgentRefusal(
    'MarkerMoved',
    withFix(
      `MARKER_MOVED: "${at.rel}" is not what the approved plan saw (marker ${planned}, now ${now}), so nothing of it was removed`,
      'look at the plan again (datum work show ITEM shows the new one) and approve what it lists now',
    ),
    { path: at.rel, planned_marker: planned, current_marker: now },
  );
}

const declaresOwner = (want: Wanted | undefined) => want?.uid !== undefined || want?.gid !== undefined;

const unchanged = (a: Stats, b: Stats) =>
  a.isFile() && a.dev === b.dev && a.ino === b.ino && a.ctimeMs === b.ctimeMs && a.mtimeMs === b.mtimeMs && a.size === b.size;

/**
 * Step 5: the replaced inode read again through the descriptor held since step 1. Its ctime moved
 * with the swap itself, so mtime, size and the bytes tell. A change is kept (the hard link holds
 * it already; a copy is taken now otherwise) and refused as MARKER_MOVED, although the new bytes
 * are in place: the controller reads it as another writer at work, and an operator decides.
 */
async function changedDuringSwap(
  dir: HeldDir,
  name: string,
  at: Replacing,
  held: { handle: FileHandle; kept: Stats; digest: string; found: string },
  backup: Backup,
): Promise<void> {
  const after = await held.handle.stat();
  const bytes = await readAll(held.handle, Math.max(limits.backupBytes, after.size), at.rel);
  if (after.mtimeMs === held.kept.mtimeMs && after.size === held.kept.size && sha256(bytes) === held.digest) return;
  const keptAt = await backup.keepAlso(bytes, after);
  const ours = await lstatAt(dir, name);
  throw new AgentRefusal(
    'MarkerMoved',
    withFix(
      `MARKER_MOVED: another writer changed "${at.rel}" while Datum replaced it (marker ${held.found}, then ${fileMarker(after, sha256(bytes))}); Datum's bytes are in place and the other writer's are kept at .datum/backup/${keptAt}`,
      `an operator decides: compare .datum/backup/${keptAt} with the file, then datum resolve with --resolution retake|yield`,
    ),
    {
      path: at.rel,
      planned_marker: held.found,
      current_marker: ours ? fileMarker(ours) : ABSENT_MARKER,
      preserved_at: `.datum/backup/${keptAt}`,
      after_swap: true,
    },
  );
}

interface Backup {
  /** Under .datum/backup/. */
  rel: string;
  /** Removes the backup of a replacement that did not happen. */
  forget(): Promise<void>;
  /** Prunes the target's older backups, once the replacement happened. */
  prune(): Promise<void>;
  /** Keeps `bytes` too (a change found after the swap), unless the backup is the inode itself; returns where. */
  keepAlso(bytes: Buffer, st: Stats): Promise<string>;
  close(): Promise<void>;
}

const STAMP = /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z(-\d+)?$/;

/**
 * Step 2: .datum/backup/<target>.<timestamp> becomes a second name of the inode about to be
 * replaced (by the resolved path, so one target keeps one history however it is spelled), then
 * that target's backups are pruned. A file too large to back up is not replaced.
 */
async function keepBackup(
  root: string,
  dir: HeldDir,
  name: string,
  at: Replacing,
  x: { seen: Stats; bytes: Buffer; found: string },
  now: () => Date,
  label = '',
): Promise<Backup> {
  const stamp = `${at.target}.${label}${fileStamp(now())}`;
  const bloc = await locateIn(root, `.datum/backup/${stamp}`, 'backup path', '.datum');
  const bdir = await openLocatedDir(root, bloc, stamp, 'backup path');
  try {
    const bname = await linkOrCopy(dir, name, bdir, path.basename(bloc.abs), x);
    if (bname === null) {
      const now = await lstatAt(dir, name);
      throw movedBeforeSwap(at, x.found, now ? fileMarker(now) : ABSENT_MARKER);
    }
    const rel = path.join(path.dirname(stamp), bname);
    const linked = (await lstatAt(bdir, bname))?.ino === x.seen.ino;
    return {
      rel,
      forget: () => fs.rm(bdir.at(bname), { force: true }),
      prune: () => pruneBackups(bdir, name),
      keepAlso: async (bytes, st) => {
        if (linked) return rel;
        const also = `${bname}-changed`;
        await atomicWriteAt(bdir, also, bytes, st.mode & 0o777);
        return path.join(path.dirname(stamp), also);
      },
      close: () => bdir.close(),
    };
  } catch (err) {
    await bdir.close();
    throw err;
  }
}

/**
 * A hard link to `name`'s inode at a free `base[-n]` in the backup directory, checked to be the
 * inode that was read; a copy of its bytes where a link cannot be made (another device, or the
 * kernel's protected_hardlinks for a file the agent's user does not own). Returns the name used.
 */
async function linkOrCopy(
  dir: HeldDir,
  name: string,
  bdir: HeldDir,
  base: string,
  x: { seen: Stats; bytes: Buffer },
): Promise<string | null> {
  for (let n = 0; ; n++) {
    const bname = n === 0 ? base : `${base}-${n}`;
    try {
      bdir.verifySync();
      dir.verifySync();
      linkSync(dir.at(name), bdir.at(bname));
    } catch (err) {
      if (isCode(err, 'EEXIST')) continue;
      if (!isCode(err, 'EXDEV') && !isCode(err, 'EPERM') && !isCode(err, 'EMLINK')) throw err;
      if ((await lstatAt(bdir, bname)) !== null) continue;
      await atomicWriteAt(bdir, bname, x.bytes, x.seen.mode & 0o777);
      return bname;
    }
    const linked = await lstatAt(bdir, bname);
    if (linked?.ino === x.seen.ino && linked.dev === x.seen.dev) return bname;
    // Replaced between the read and the link: what was read is not what is there.
    await fs.rm(bdir.at(bname), { force: true });
    return null;
  }
}

/**
 * Keeps the newest BACKUPS_KEPT_PER_TARGET backups of `name`, and always the oldest: the first
 * backup of a target is what was there before Datum ever wrote it, and the one copy of it.
 */
async function pruneBackups(bdir: HeldDir, name: string): Promise<void> {
  const prefix = `${name}.`;
  const mine = (await bdir.entries()).filter((n) => n.startsWith(prefix) && STAMP.test(n.slice(prefix.length))).sort();
  const oldest = mine.shift();
  if (oldest === undefined) return;
  const keep = Math.max(limits.backupsKept - 1, 1);
  for (const old of mine.slice(0, Math.max(mine.length - keep, 0))) await fs.rm(bdir.at(old), { force: true });
}

function notRegular(at: Replacing, kind: string): AgentRefusal {
  return new AgentRefusal(
    'DestructiveActionRefusal',
    withFix(
      `"${at.rel}" is a ${kind}, not a regular file; writing the ${at.type} would replace it and destroy what is there`,
      `move "${at.rel}" away by hand if it is not needed, then let Datum write the ${at.type}`,
    ),
    { path: at.rel, kind },
  );
}

function tooLargeToKeep(at: Replacing, size: number): AgentRefusal {
  return new AgentRefusal(
    'SizeLimitExceeded',
    withFix(
      `"${at.target}" now holds ${sized(size)}, more than the ${sized(limits.backupBytes)} the agent keeps as a backup (MAX_BACKUP_BYTES); replacing it would lose it without a copy`,
      `move "${at.target}" away by hand (or shrink it), then let Datum write it`,
    ),
    { path: at.target, size, cap: limits.backupBytes },
  );
}

/** Found changed at the last look before the swap: nothing was replaced. */
function movedBeforeSwap(at: Replacing, planned: string | null, now: string): AgentRefusal {
  return new AgentRefusal(
    'MarkerMoved',
    withFix(
      `MARKER_MOVED: "${at.rel}" changed right before Datum's write (marker ${planned ?? 'none'}, now ${now}); another writer is at work, and writing now would lose its change, so nothing was written`,
      'Datum reports a conflicting writer; an operator decides with datum resolve --resolution retake|yield',
    ),
    { path: at.rel, planned_marker: planned, current_marker: now },
  );
}
