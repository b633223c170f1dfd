import path from 'node:path';
import { z } from 'zod';
import { fileTarget, type FileSpec, type ObservedResource } from '../../domain';
import {
  pathStamp,
  sha256,
  sha256Handle,
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
  type ProtectedArea,
  replaceIn,
  type Replaced,
} from '../fs';
import { bytes as sized, limits } from '../limits';
import { ABSENT_MARKER, fileMarker } from '../markers';
import { withFix } from '../../contract';
import { AgentRefusal } from '../refusal';
import {
  now,
  observeGuarded,
  observed,
  short,
  specOf,
  type ApplyResult,
  type AtWrite,
  type ImportResult,
  type NodeContext,
  type Provider,
} from './types';

/*
 * file: the sha256 of the bytes at <root>/<path> (null when absent). Written atomically; the
 * previous content is kept under .datum/backup/ (src/agent/fs/replace.ts). Deleting a file is
 * destructive and never done.
 */

// The path is checked by checkFileResourcePath, so a path that leaves the root is refused as
// PathOutsideRoot rather than as a malformed action.
export const fileWriteSpec = z.strictObject({
  path: z.string(),
  content: z.string(),
  sha256: z.string().regex(/^[a-f0-9]{64}$/),
});
export type FileWriteSpec = z.infer<typeof fileWriteSpec>;

export const fileProvider: Provider<FileSpec> = {
  actions: ['file.write'],
  destructive: ['file.delete'],
  observe: (ctx, _key, spec) => observeFile(ctx, spec),
  apply: (ctx, action, atWrite) => applyFileWrite(ctx, action.resource_key, specOf(action, fileWriteSpec), now, atWrite),
  targetNow: (ctx, action) => observeFile(ctx, { path: specOf(action, fileWriteSpec).path }),
  watch: {
    marker: (root, _key, spec) => pathStamp(path.join(root, spec.path)),
    dirs: (root, _key, spec) => [path.dirname(path.join(root, spec.path))],
  },
  importSpec: (ctx, _key, name) => importFile(ctx, name),
};

/**
 * The largest file `datum import` declares: its text travels in the workflow's result and is
 * printed as YAML, and configuration files are far smaller. A larger one belongs in a release.
 */
export const MAX_IMPORT_BYTES = 256 * 1024;

/** A file as desired state declares it to keep it as it is: its path and its exact text. */
async function importFile(ctx: NodeContext, rel: string): Promise<ImportResult<FileSpec>> {
  try {
    checkFileResourcePath(rel);
    const loc = await locateIn(ctx.root, rel, 'file path', null);
    const read = await readLocated(
      ctx.root,
      loc,
      rel,
      'file path',
      async (entry): Promise<{ bytes: Buffer } | { problem: string }> => {
        const { handle, st } = await openRegular(entry, rel);
        try {
          if (st.size > MAX_IMPORT_BYTES)
            return { problem: `"${rel}" holds ${sized(st.size)}, more than the ${sized(MAX_IMPORT_BYTES)} an import declares` };
          return { bytes: await readAll(handle, MAX_IMPORT_BYTES, rel) };
        } finally {
          await handle.close();
        }
      },
    );
    if (read === null) return { problem: `nothing is at "${rel}"` };
    if ('problem' in read) return { problem: withFix(read.problem, 'ship large data in a release artifact') };
    const text = textOf(read.bytes);
    if (text === null) return { problem: withFix(`"${rel}" is not UTF-8 text`, 'ship binary data in a release artifact') };
    return { spec: { type: 'file', path: rel, content: text } };
  } catch (err) {
    if (err instanceof AgentRefusal || err instanceof NotRegularFile) return { problem: err.message };
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { problem: `nothing is at "${rel}"` };
    if (typeof code === 'string') return { problem: `"${rel}" cannot be read (${code})` };
    throw err;
  }
}

/** The bytes as text when they are UTF-8 without NUL (which YAML cannot carry); null otherwise. */
function textOf(bytes: Buffer): string | null {
  if (bytes.includes(0)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

export async function observeFile(ctx: NodeContext, spec: Pick<FileSpec, 'path'>): Promise<ObservedResource> {
  const detail = { path: spec.path };
  return await observeGuarded('file', detail, async () => {
    try {
      checkFileResourcePath(spec.path);
      const loc = await locateIn(ctx.root, spec.path, 'file path', null);
      const seen = await readLocated(ctx.root, loc, spec.path, 'file path', (entry) =>
        observeRegularFile('file', entry, detail, (read) => ({ ok: true, value: read.sha256 })),
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
  valueOf: (read: ReadFile) => { ok: true; value: ObservedResource['value'] } | { ok: false; error: string },
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
    const read = await readWhole(handle, fst.size, detail.path);
    const value = valueOf(read);
    const marker = fileMarker(fst, read.sha256);
    if (!value.ok)
      return observed(type, null, marker, { ...detail, kind: 'regular file', size: fst.size, parse_error: value.error });
    return observed(type, value.value, marker, { ...detail, kind: 'regular file', size: fst.size });
  } finally {
    await handle.close();
  }
}

/** Up to MAX_BACKUP_BYTES read whole; a larger file is only hashed, a chunk at a time. */
async function readWhole(
  handle: Awaited<ReturnType<typeof openRegular>>['handle'],
  size: number,
  shown: string,
): Promise<ReadFile> {
  if (size <= limits.backupBytes) {
    try {
      const bytes = await readAll(handle, limits.backupBytes, shown);
      return { bytes, sha256: sha256(bytes) };
    } catch (err) {
      if (!(err instanceof FileTooLarge)) throw err; // grew while read: hash it instead
    }
  }
  return { bytes: null, sha256: await sha256Handle(handle) };
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
  const { previous, st, sha256: digest } = await writeReplacing(ctx, 'file', spec.path, spec.content, now, atWrite);
  const before = previous ? `replacing ${previous.size} bytes (kept at .datum/backup/${previous.backup})` : 'where no file was';
  return {
    marker_after: fileMarker(st, digest),
    detail: `wrote ${Buffer.byteLength(spec.content)} bytes (sha256 ${short(actual)}) to ${spec.path} ${before}.`,
  };
}

/**
 * Protections were judged on the target where the write would land then (its identity); a
 * symlinked directory created, removed or re-pointed since makes the path lead elsewhere, perhaps
 * to a protected file. Nothing is written: the next pass judges the new identity. From here on the
 * held directories keep the write where it was located.
 */
function assertJudged(ctx: NodeContext, rel: string, target: string): void {
  const written = fileTarget(target.split(path.sep).join('/'));
  if (ctx.judged === undefined || ctx.judged === null || ctx.judged === written) return;
  throw new AgentRefusal(
    'PathOutsideRoot',
    withFix(
      `file path "${rel}" now leads to ${written}, not to ${ctx.judged} where Datum judged what protects it (a symlinked directory on the way changed meanwhile), so nothing was written`,
      `find out who reshapes the directories of "${rel}" and stop them; the next pass judges where it leads then`,
    ),
    { path: rel, judged: ctx.judged, resolved: written },
  );
}

/**
 * The write path shared by file and flag: locate inside the root and inside the right area
 * (resolved, not spelled), hold the target's directory open (reached without following a
 * symlink, so a parent swapped afterwards cannot redirect the write), then replace what is there
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
): Promise<Replaced> {
  const what = `${type} path`;
  const area: ProtectedArea | null = type === 'flag' ? 'flags' : null;
  const loc = await refusingSwaps(rel, what, true, () => locateIn(ctx.root, rel, what, area));
  const name = path.basename(loc.abs);
  const target = path.relative(ctx.root, loc.abs);
  if (type === 'file') assertJudged(ctx, rel, target);
  const dir = await refusingSwaps(rel, what, true, () => openLocatedDir(ctx.root, loc, rel, what));
  try {
    return await refusingSwaps(rel, what, true, () =>
      atWrite((checked) => replaceIn(ctx.root, dir, name, { type, rel, target }, content, checked, now)),
    );
  } finally {
    await dir.close();
  }
}
