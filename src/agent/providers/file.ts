import type { Stats } from 'node:fs';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { type FileSpec, type ObservedResource } from '../../domain';
import { atomicWriteAt, fileStamp, lstatAt, readRegular, readRegularAt, sha256, type HeldDir } from '../fsx';
import { bytes as sized, limits } from '../limits';
import { ABSENT_MARKER, fileMarker } from '../markers';
import { checkFileResourcePath, kindOf, locateIn, lstatOrNull, openLocatedDir, readLocated, type ProtectedArea } from '../paths';
import { withFix } from '../../contract';
import { AgentRefusal } from '../refusal';
import { observed, short, type ApplyResult, type AtWrite, type NodeContext } from './types';

/*
 * file: the sha256 of the bytes at <root>/<path> (null when absent). Written atomically; the
 * previous content is kept under .datum/backup/. Deleting a file is destructive and never done.
 */

// The path is checked by checkFileResourcePath, so a path that leaves the root is refused as
// PathOutsideRoot rather than as a malformed action.
export const fileWriteSpec = z.strictObject({
  path: z.string(),
  content: z.string(),
  sha256: z.string().regex(/^[a-f0-9]{64}$/),
});
export type FileWriteSpec = z.infer<typeof fileWriteSpec>;

export async function observeFile(ctx: NodeContext, spec: Pick<FileSpec, 'path'>): Promise<ObservedResource> {
  const detail = { path: spec.path };
  try {
    checkFileResourcePath(spec.path);
    const loc = await locateIn(ctx.root, spec.path, 'file path', null);
    const seen = await readLocated(ctx.root, loc, spec.path, 'file path', (entry) =>
      observeRegularFile('file', entry, detail, (bytes) => ({ ok: true, value: sha256(bytes) })),
    );
    return seen ?? observed('file', null, ABSENT_MARKER, { ...detail, kind: 'absent' });
  } catch (err) {
    if (err instanceof AgentRefusal) {
      // A path leaving the root, or leading into Datum's own areas, is not an obstruction
      // (nothing would be destroyed, and nothing there is read as the file's value): the write is
      // refused when planned, and that refusal is the condition naming the path.
      if (err.type === 'PathOutsideRoot' || err.type === 'ProtectedAreaRefusal')
        return observed('file', null, null, { ...detail, refusal: err.type, path_error: err.message });
      return observed('file', null, null, { ...detail, refusal: err.type }, err.message);
    }
    throw err;
  }
}

/**
 * Shared by file and flag: a regular file's value and marker, 'absent' when nothing is there,
 * an obstruction when something that is not a regular file is in the way.
 */
export async function observeRegularFile(
  type: 'file' | 'flag',
  abs: string,
  detail: Record<string, string>,
  valueOf: (bytes: Buffer) => { ok: true; value: ObservedResource['value'] } | { ok: false; error: string },
): Promise<ObservedResource> {
  const st = await lstatOrNull(abs);
  if (st === null) return observed(type, null, ABSENT_MARKER, { ...detail, kind: 'absent' });
  if (!st.isFile()) {
    const kind = kindOf(st);
    return observed(
      type,
      null,
      fileMarker(st),
      { ...detail, kind },
      `"${detail.path}" is a ${kind}, not a regular file; writing the ${type} would replace it and destroy what is there`,
    );
  }
  const { bytes, st: fst } = await readRegular(abs);
  const read = valueOf(bytes);
  if (!read.ok)
    return observed(type, null, fileMarker(fst), { ...detail, kind: 'regular file', size: fst.size, parse_error: read.error });
  return observed(type, read.value, fileMarker(fst), { ...detail, kind: 'regular file', size: fst.size });
}

export async function applyFileWrite(
  ctx: NodeContext,
  resourceKey: string,
  spec: FileWriteSpec,
  now: () => Date,
  atWrite: AtWrite,
): Promise<ApplyResult> {
  checkFileResourcePath(spec.path);
  const size = Buffer.byteLength(spec.content);
  if (size > limits.fileContentBytes) {
    throw new AgentRefusal(
      'SizeLimitExceeded',
      withFix(
        `file.write of "${resourceKey}" carries ${sized(size)} of content, more than the ${sized(limits.fileContentBytes)} a file resource may hold (MAX_FILE_CONTENT_BYTES)`,
        'ship large data as part of a release artifact and keep file resources for configuration',
      ),
      { size, cap: limits.fileContentBytes },
    );
  }
  const actual = sha256(spec.content);
  if (actual !== spec.sha256) {
    throw new AgentRefusal(
      'InvalidAction',
      withFix(
        `file.write of "${resourceKey}" carries content whose sha256 is ${actual}, not the ${spec.sha256} it claims`,
        'the action was corrupted in transit; re-plan from the desired state',
      ),
    );
  }
  const { previous, st } = await writeReplacing(ctx, 'file', spec.path, spec.content, now, atWrite);
  const before = previous ? `replacing ${previous.size} bytes (kept at .datum/backup/${previous.backup})` : 'where no file was';
  return {
    marker_after: fileMarker(st),
    detail: `wrote ${Buffer.byteLength(spec.content)} bytes (sha256 ${short(actual)}) to ${spec.path} ${before}.`,
  };
}

/**
 * The atomic write path shared by file and flag: locate inside the root and inside the right
 * area (resolved, not spelled), hold the target's directory open (reached without following a
 * symlink, so a parent swapped afterwards cannot redirect the write), refuse anything that is
 * not a regular file, keep the previous bytes under .datum/backup/<resolved path>.<timestamp>,
 * then temp + fsync + rename + fsync dir, all inside the held directory. From the look at what is
 * there to the rename, it runs through `atWrite`: what it reads and replaces is what the agent's
 * re-check saw, and a refused write leaves neither a backup nor a temp file behind.
 */
export async function writeReplacing(
  ctx: NodeContext,
  type: 'file' | 'flag',
  rel: string,
  content: string,
  now: () => Date,
  atWrite: AtWrite,
): Promise<Replaced> {
  const what = `${type} path`;
  const area: ProtectedArea | null = type === 'flag' ? 'flags' : null;
  const loc = await locateIn(ctx.root, rel, what, area);
  const name = path.basename(loc.abs);
  const dir = await openLocatedDir(ctx.root, loc, rel, what);
  try {
    return await atWrite(() => replaceIn(ctx, dir, name, { type, rel, target: path.relative(ctx.root, loc.abs) }, content, now));
  } finally {
    await dir.close();
  }
}

type Replaced = { previous: { size: number; backup: string } | null; st: Stats };

/** What is at `name` in the held directory, replaced by `content`: refused when not a regular file. */
async function replaceIn(
  ctx: NodeContext,
  dir: HeldDir,
  name: string,
  at: { type: 'file' | 'flag'; rel: string; target: string },
  content: string,
  now: () => Date,
): Promise<Replaced> {
  const { type, rel } = at;
  const st = await lstatAt(dir, name);
  if (st !== null && !st.isFile()) {
    throw new AgentRefusal(
      'DestructiveActionRefusal',
      withFix(
        `"${rel}" is a ${kindOf(st)}, not a regular file; writing the ${type} would replace it and destroy what is there`,
        `move "${rel}" away by hand if it is not needed, then let Datum write the ${type}`,
      ),
      { path: rel, kind: kindOf(st) },
    );
  }
  const previous = st === null ? null : await keepBackup(ctx, dir, name, at.target, st, now);
  // The marker is read back from the file our rename put in place: the inode is ours.
  const written = await atomicWriteAt(dir, name, content, st ? st.mode & 0o777 : 0o644);
  return { previous, st: written };
}

/**
 * Copies the bytes about to be replaced to .datum/backup/<target>.<timestamp> (by the resolved
 * path, so one target keeps one history however it is spelled) and prunes that target's backups
 * to the newest BACKUPS_KEPT_PER_TARGET. A file too large to back up is not replaced.
 */
async function keepBackup(
  ctx: NodeContext,
  dir: HeldDir,
  name: string,
  target: string,
  st: Stats,
  now: () => Date,
): Promise<{ size: number; backup: string }> {
  if (st.size > limits.backupBytes) {
    throw new AgentRefusal(
      'SizeLimitExceeded',
      withFix(
        `"${target}" now holds ${sized(st.size)}, more than the ${sized(limits.backupBytes)} the agent keeps as a backup (MAX_BACKUP_BYTES); replacing it would lose it without a copy`,
        `move "${target}" away by hand (or shrink it), then let Datum write it`,
      ),
      { path: target, size: st.size, cap: limits.backupBytes },
    );
  }
  const { bytes } = await readRegularAt(dir, name);
  const backupRel = `${target}.${fileStamp(now())}`;
  const bloc = await locateIn(ctx.root, `.datum/backup/${backupRel}`, 'backup path', '.datum');
  const bdir = await openLocatedDir(ctx.root, bloc, backupRel, 'backup path');
  try {
    await atomicWriteAt(bdir, path.basename(bloc.abs), bytes, st.mode & 0o777);
    await pruneBackups(bdir, name);
  } finally {
    await bdir.close();
  }
  return { size: bytes.length, backup: backupRel };
}

const STAMP = /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$/;

/** Keeps the newest BACKUPS_KEPT_PER_TARGET backups of `name` in its backup directory. */
async function pruneBackups(bdir: HeldDir, name: string): Promise<void> {
  const prefix = `${name}.`;
  const mine = (await fs.readdir(`/proc/self/fd/${bdir.handle.fd}`))
    .filter((n) => n.startsWith(prefix) && STAMP.test(n.slice(prefix.length)))
    .sort()
    .reverse();
  for (const old of mine.slice(limits.backupsKept)) await fs.rm(bdir.at(old), { force: true });
}
