import type { Stats } from 'node:fs';
import { z } from 'zod';
import { type FileSpec, type ObservedResource } from '../../domain';
import { atomicWrite, fileStamp, readRegular, sha256 } from '../fsx';
import { ABSENT_MARKER, fileMarker } from '../markers';
import { checkFileResourcePath, createParents, kindOf, locate, lstatOrNull } from '../paths';
import { withFix } from '../../contract';
import { AgentRefusal } from '../refusal';
import { observed, short, type ApplyResult, type NodeContext } from './types';

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
  let abs: string;
  try {
    checkFileResourcePath(spec.path);
    abs = (await locate(ctx.root, spec.path, 'file path')).abs;
  } catch (err) {
    if (err instanceof AgentRefusal) {
      // A path leaving the root is not an obstruction (nothing would be destroyed): the write is
      // refused as PathOutsideRoot when planned, and that refusal is the condition naming the path.
      if (err.type === 'PathOutsideRoot')
        return observed('file', null, null, { ...detail, refusal: err.type, path_error: err.message });
      return observed('file', null, null, { ...detail, refusal: err.type }, err.message);
    }
    throw err;
  }
  return await observeRegularFile('file', abs, detail, (bytes) => ({ ok: true, value: sha256(bytes) }));
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
): Promise<ApplyResult> {
  checkFileResourcePath(spec.path);
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
  const { previous, st } = await writeReplacing(ctx, 'file', spec.path, spec.content, now);
  const before = previous ? `replacing ${previous.size} bytes (kept at .datum/backup/${previous.backup})` : 'where no file was';
  return {
    marker_after: fileMarker(st),
    detail: `wrote ${Buffer.byteLength(spec.content)} bytes (sha256 ${short(actual)}) to ${spec.path} ${before}.`,
  };
}

/**
 * The atomic write path shared by file and flag: locate inside the root, refuse anything that
 * is not a regular file, keep the previous bytes under .datum/backup/<rel>.<timestamp>, then
 * temp + fsync + rename + fsync dir.
 */
export async function writeReplacing(
  ctx: NodeContext,
  type: 'file' | 'flag',
  rel: string,
  content: string,
  now: () => Date,
): Promise<{ previous: { size: number; backup: string } | null; st: Stats }> {
  const loc = await locate(ctx.root, rel, `${type} path`);
  const st = await lstatOrNull(loc.abs);
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
  let previous: { size: number; backup: string } | null = null;
  if (st !== null) {
    const backupRel = `${rel}.${fileStamp(now())}`;
    const backupLoc = await locate(ctx.root, `.datum/backup/${backupRel}`, 'backup path');
    await createParents(backupLoc);
    const { bytes } = await readRegular(loc.abs);
    await atomicWrite(backupLoc.abs, bytes, st.mode & 0o777);
    previous = { size: bytes.length, backup: backupRel };
  }
  await createParents(loc);
  // The marker is read back from the file our rename put in place: the inode is ours.
  const written = await atomicWrite(loc.abs, content, st ? st.mode & 0o777 : 0o644);
  return { previous, st: written };
}
