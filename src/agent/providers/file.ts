import type { Stats } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { FileSpec, ObservedResource } from '../../domain';
import { attributesOf } from '../../domain/resources';
import {
  pathStamp,
  sha256,
  FileTooLarge,
  NotRegularFile,
  openRegular,
  readAll,
  checkFileResourcePath,
  kindOf,
  locateIn,
  lstatOrNull,
  openLocatedDir,
  readLocated,
  refusingSwaps,
  type HeldDir,
  type ProtectedArea,
  replaceIn,
  setFileAttributesIn,
  type Replaced,
  type Wanted,
} from '../fs';
import { bytes as sized, limits } from '../limits';
import { ABSENT_MARKER, fileMarker } from '../markers';
import { withFix } from '../../contract';
import { AgentRefusal } from '../refusal';
import { observedAttributes, wantedOf } from './attributes';
import { importFile } from './imports';
import {
  now,
  observeGuarded,
  observed,
  short,
  specOf,
  type ApplyResult,
  type AtWrite,
  type NodeContext,
  type Provider,
} from './types';

/*
 * file: the sha256 of the bytes at <root>/<path> (null when absent), with the mode, owner and
 * group it declares ({sha256, mode?, owner?, group?}; the plain sha256 when it declares none).
 * Written atomically, the declared attributes on the new inode before its rename; the previous
 * content is kept under .datum/backup/ (src/agent/fs/replace.ts). Attributes alone are set in
 * place on the held file (src/agent/fs/attributes.ts). Deleting a file is destructive and never done.
 */

const attributeFields = { mode: z.string().optional(), owner: z.string().optional(), group: z.string().optional() };
const SHA256_HEX = /^[a-f0-9]{64}$/;

// The path is checked by checkFileResourcePath, so a path that leaves the root is refused as
// PathOutsideRoot rather than as a malformed action.
export const fileWriteSpec = z.strictObject({
  path: z.string(),
  content: z.string(),
  sha256: z.string().regex(SHA256_HEX),
  ...attributeFields,
});
export type FileWriteSpec = z.infer<typeof fileWriteSpec>;

/** file.attributes: the content stays (its sha256 says which), the declared attributes are set. */
const fileAttributesSpec = z.strictObject({ path: z.string(), sha256: z.string().regex(SHA256_HEX), ...attributeFields });

/** What observe needs of a file: its path and what it declares about its inode. */
type FileObserved = Pick<FileSpec, 'path' | 'mode' | 'owner' | 'group'>;

const specOfAction = (action: Parameters<Provider['apply']>[1]): FileObserved =>
  specOf(action, action.action === 'file.attributes' ? fileAttributesSpec : fileWriteSpec);

export const fileProvider: Provider<FileSpec> = {
  actions: ['file.write', 'file.attributes'],
  destructive: ['file.delete'],
  observe: (ctx, _key, spec) => observeFile(ctx, spec),
  apply: (ctx, action, atWrite) =>
    action.action === 'file.attributes'
      ? applyFileAttributes(ctx, action.resource_key, specOf(action, fileAttributesSpec), atWrite)
      : applyFileWrite(ctx, action.resource_key, specOf(action, fileWriteSpec), now, atWrite),
  targetNow: (ctx, action) => observeFile(ctx, specOfAction(action)),
  watch: {
    // The stamp carries ctime, which a chmod or chown moves: the watch sees one made by hand.
    marker: (root, _key, spec) => pathStamp(path.join(root, spec.path)),
    dirs: (root, _key, spec) => [path.dirname(path.join(root, spec.path))],
  },
  importSpec: (ctx, _key, name) => importFile(ctx, name),
};

export async function observeFile(ctx: NodeContext, spec: FileObserved): Promise<ObservedResource> {
  const detail = { path: spec.path };
  const declared = attributesOf(spec);
  const valueOf = async (read: ReadFile, st: Stats) =>
    Object.keys(declared).length === 0
      ? { ok: true as const, value: read.sha256 }
      : { ok: true as const, value: { sha256: read.sha256, ...(await observedAttributes(declared, st)) } };
  return await observeGuarded('file', detail, async () => {
    try {
      checkFileResourcePath(spec.path);
      const loc = await locateIn(ctx.root, spec.path, 'file path', null);
      const seen = await readLocated(ctx.root, loc, spec.path, 'file path', (entry) =>
        observeRegularFile('file', entry, detail, valueOf),
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
  });
}

/** A value read from a regular file, or why it is none. */
type ValueRead = { ok: true; value: ObservedResource['value'] } | { ok: false; error: string };

/** A regular file as read: its bytes (null past MAX_BACKUP_BYTES: only hashed, never held) and their sha256. */
export interface ReadFile {
  bytes: Buffer | null;
  sha256: string;
}

/**
 * Shared by file and flag: a regular file's value and marker, 'absent' when nothing is there,
 * an obstruction when something that is not a regular file is in the way (a FIFO is seen as
 * one without being opened for a blocking read). The marker carries the bytes' digest.
 */
export async function observeRegularFile(
  type: 'file' | 'flag',
  abs: string,
  detail: Record<string, string>,
  valueOf: (read: ReadFile, st: Stats) => ValueRead | Promise<ValueRead>,
): Promise<ObservedResource> {
  const st = await lstatOrNull(abs);
  if (st === null) return observed(type, null, ABSENT_MARKER, { ...detail, kind: 'absent' });
  if (!st.isFile()) return inTheWay(type, detail, st);
  let opened;
  try {
    opened = await openRegular(abs, detail.path);
  } catch (err) {
    if (err instanceof NotRegularFile) return inTheWay(type, detail, (await lstatOrNull(abs)) ?? st);
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      return observed(type, null, ABSENT_MARKER, { ...detail, kind: 'absent' });
    throw err;
  }
  const { handle, st: fst } = opened;
  try {
    // Capped from fstat, before a byte is read: a terabyte sparse file is never hashed.
    if (fst.size > limits.backupBytes) return tooLarge(type, detail, fst);
    const read = await readWhole(handle, detail.path);
    if (read === null) return tooLarge(type, detail, await handle.stat());
    const value = await valueOf(read, fst);
    const marker = fileMarker(fst, read.sha256);
    if (!value.ok)
      return observed(type, null, marker, { ...detail, kind: 'regular file', size: fst.size, parse_error: value.error });
    // More than one name for the inode: its mode and owner are refused a change (file.attributes).
    const links: Record<string, number> = fst.nlink > 1 ? { links: fst.nlink } : {};
    return observed(type, value.value, marker, { ...detail, kind: 'regular file', size: fst.size, ...links });
  } finally {
    await handle.close();
  }
}

/** The file's bytes, at most MAX_BACKUP_BYTES of them; null when it grew past that while read. */
async function readWhole(handle: Awaited<ReturnType<typeof openRegular>>['handle'], shown: string): Promise<ReadFile | null> {
  try {
    const bytes = await readAll(handle, limits.backupBytes, shown);
    return { bytes, sha256: sha256(bytes) };
  } catch (err) {
    if (err instanceof FileTooLarge) return null;
    throw err;
  }
}

/**
 * A regular file larger than the agent reads or keeps a copy of (MAX_BACKUP_BYTES), named with its
 * size and never read: no file resource holds that much (MAX_FILE_CONTENT_BYTES), and replacing it
 * would destroy it without a copy, so it is an obstruction an operator moves by hand.
 */
function tooLarge(type: 'file' | 'flag', detail: Record<string, string>, st: Stats) {
  return observed(
    type,
    null,
    fileMarker(st),
    { ...detail, kind: 'regular file', size: st.size },
    withFix(
      `"${detail.path}" holds ${sized(st.size)}, more than the ${sized(limits.backupBytes)} Datum reads or keeps a copy of; it was not read, and writing the ${type} would destroy it`,
      `move "${detail.path}" away by hand if it is not needed`,
    ),
  );
}

function inTheWay(
  type: 'file' | 'flag',
  detail: Record<string, string>,
  st: Parameters<typeof kindOf>[0] & Parameters<typeof fileMarker>[0],
) {
  const kind = kindOf(st);
  return observed(
    type,
    null,
    fileMarker(st),
    { ...detail, kind },
    `"${detail.path}" is a ${kind}, not a regular file; writing the ${type} would replace it and destroy what is there`,
  );
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
  const want = await wantedOf('file', spec, `file.write of "${resourceKey}"`);
  const { previous, st, sha256: digest } = await writeReplacing(ctx, 'file', spec.path, spec.content, now, atWrite, want);
  const before = previous ? `replacing ${previous.size} bytes (kept at .datum/backup/${previous.backup})` : 'where no file was';
  return {
    marker_after: fileMarker(st, digest),
    detail: `wrote ${Buffer.byteLength(spec.content)} bytes (sha256 ${short(actual)}) to ${spec.path}${declaredText(spec)} ${before}.`,
  };
}

/** "mode 0640, owner daemon": what a spec declares, in words. */
const declaredList = (spec: FileObserved) =>
  Object.entries(attributesOf(spec))
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

/** " with mode 0640, owner daemon", or "" when it declares nothing. */
const declaredText = (spec: FileObserved) => (declaredList(spec) === '' ? '' : ` with ${declaredList(spec)}`);

/** file.attributes: the declared mode, owner and group set on the file in place, its content and inode kept. */
async function applyFileAttributes(
  ctx: NodeContext,
  resourceKey: string,
  spec: z.infer<typeof fileAttributesSpec>,
  atWrite: AtWrite,
): Promise<ApplyResult> {
  checkFileResourcePath(spec.path);
  const want = await wantedOf('file', spec, `file.attributes of "${resourceKey}"`);
  const done = await inHeldParent(ctx, 'file', spec.path, false, (dir, name, target) =>
    atWrite((checked) => setFileAttributesIn(ctx.root, dir, name, spec.path, { target, sha256: spec.sha256 }, want, checked)),
  );
  return {
    marker_after: fileMarker(done.st, done.sha256),
    detail: done.changed
      ? `set ${declaredList(spec)} on ${spec.path} in place (content sha256 ${short(done.sha256)} and inode ${done.st.ino} kept).`
      : `${spec.path} already had ${declaredList(spec) || 'what the action declares'}; nothing was changed.`,
  };
}

/**
 * Protections were judged on the target where the write would land then (its identity); a
 * symlinked directory created, removed or re-pointed since makes the path lead elsewhere, perhaps
 * to a protected file. Nothing is written: the next pass judges the new identity. From here on the
 * held directories keep the write where it was located.
 */
function assertJudged(ctx: NodeContext, type: 'file' | 'directory', rel: string, target: string): void {
  const written = `${type}:${target.split(path.sep).join('/')}`;
  if (ctx.judged === undefined || ctx.judged === null || ctx.judged === written) return;
  throw new AgentRefusal(
    'PathOutsideRoot',
    withFix(
      `${type} path "${rel}" now leads to ${written}, not to ${ctx.judged} where Datum judged what protects it (a symlinked directory on the way changed meanwhile), so nothing was written`,
      `find out who reshapes the directories of "${rel}" and stop them; the next pass judges where it leads then`,
    ),
    { path: rel, judged: ctx.judged, resolved: written },
  );
}

/**
 * Where a path resource's write lands, held: located inside the root and inside the right area
 * (resolved, not spelled; a flag only in flags/, anything else outside Datum's areas), checked
 * against the identity its protections were judged on, and the directory it is in held open
 * (reached without following a symlink, so a parent swapped afterwards cannot redirect the
 * write; created when missing and `create`). `work` gets that directory, the entry's name and
 * its resolved path under the root; a swap found on the way is refused (PathOutsideRoot).
 */
export async function inHeldParent<T>(
  ctx: NodeContext,
  type: 'file' | 'flag' | 'directory',
  rel: string,
  create: boolean,
  work: (dir: HeldDir, name: string, target: string) => Promise<T>,
): Promise<T> {
  const what = `${type} path`;
  const area: ProtectedArea | null = type === 'flag' ? 'flags' : null;
  const loc = await refusingSwaps(rel, what, true, () => locateIn(ctx.root, rel, what, area));
  const name = path.basename(loc.abs);
  const target = path.relative(ctx.root, loc.abs);
  if (type !== 'flag') assertJudged(ctx, type, rel, target);
  if (!create && loc.missing.length > 0)
    throw new AgentRefusal(
      'MarkerMoved',
      withFix(
        `MARKER_MOVED: "${rel}" is gone (its directory "${path.relative(ctx.root, loc.missing[0] ?? loc.dir)}" is not there) since the plan saw it; another writer is at work, so nothing was changed`,
        'Datum reports a conflicting writer; an operator decides with datum resolve --resolution retake|yield',
      ),
      { path: rel, current_marker: ABSENT_MARKER },
    );
  const dir = await refusingSwaps(rel, what, true, () => openLocatedDir(ctx.root, loc, rel, what));
  try {
    return await refusingSwaps(rel, what, true, () => work(dir, name, target));
  } finally {
    await dir.close();
  }
}

/**
 * The write path shared by file and flag (inHeldParent), replacing what is there
 * (src/agent/fs/replace.ts) through `atWrite`: what it reads and replaces is what the agent's
 * re-check saw, and a refused write leaves neither a backup nor a temp file behind.
 */
export async function writeReplacing(
  ctx: NodeContext,
  type: 'file' | 'flag',
  rel: string,
  content: string,
  now: () => Date,
  atWrite: AtWrite,
  want?: Wanted,
): Promise<Replaced> {
  return await inHeldParent(ctx, type, rel, true, (dir, name, target) =>
    atWrite((checked) => replaceIn(ctx.root, dir, name, { type, rel, target, want }, content, checked, now)),
  );
}
