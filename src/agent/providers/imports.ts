import { withFix } from '../../contract';
import type { Stats } from 'node:fs';
import path from 'node:path';
import { accountProblem, modeProblem, modeText } from '../../domain/resources';
import type { DirectorySpec, FileSpec } from '../../domain';
import {
  FileTooLarge,
  NotRegularFile,
  checkFileResourcePath,
  inLocatedDir,
  isErrno,
  kindOf,
  locateIn,
  lstatAt,
  readRegular,
  refusingSwaps,
  type HeldDir,
} from '../fs';
import { bytes as sized, limits } from '../limits';
import { AgentRefusal } from '../refusal';
import { accountName, type AccountDatabase } from '../users';
import type { ImportResult, NodeContext } from './types';

/*
 * `datum import` for the path types: the spec that declares what is at a path now, read through
 * held directories as observe reads it and changing nothing, so the first pass from it finds no
 * drift. A file's content is imported as text up to MAX_IMPORT_CONTENT_BYTES; binary content, a
 * larger file, or a mode Datum would refuse to write cannot be declared as it is, and the answer
 * says why.
 */

/** The spec declaring the file at `rel` as it is: its text, mode, owner and group. */
export async function importFile(ctx: NodeContext, rel: string): Promise<ImportResult<FileSpec>> {
  return await importAt<FileSpec>(ctx, rel, 'file path', async (dir, name) => {
    let read;
    try {
      read = await readRegular(dir.at(name), limits.importContentBytes, rel);
    } catch (err) {
      if (err instanceof NotRegularFile)
        return {
          problem: withFix(`"${rel}" is a ${err.kind}, not a regular file`, 'import the file it stands for, by its own path'),
        };
      if (err instanceof FileTooLarge)
        return {
          problem: withFix(
            `"${rel}" holds ${err.size} bytes, more than the ${sized(limits.importContentBytes)} datum import writes into desired state (a quarter of a desired-state file)`,
            'ship it in a release artifact instead',
          ),
        };
      throw err;
    }
    const text = asText(read.bytes);
    if (text === null)
      return {
        problem: withFix(
          `"${rel}" is binary (not UTF-8 text, or it holds NUL bytes), and desired state holds text`,
          'ship it in a release artifact instead',
        ),
      };
    const attributes = await attributesNow('file', rel, read.st);
    if ('problem' in attributes) return attributes;
    return { spec: { type: 'file', path: rel, content: text, ...attributes } };
  });
}

/** The spec declaring the directory at `rel` as it is: its mode, owner and group. */
export async function importDirectory(ctx: NodeContext, rel: string): Promise<ImportResult<DirectorySpec>> {
  return await importAt<DirectorySpec>(ctx, rel, 'directory path', async (dir, name) => {
    const st = await lstatAt(dir, name);
    if (st === null) return { problem: `nothing is at "${rel}"` };
    if (!st.isDirectory()) return { problem: `"${rel}" is a ${kindOf(st)}, not a directory` };
    const attributes = await attributesNow('directory', rel, st);
    if ('problem' in attributes) return attributes;
    return { spec: { type: 'directory', path: rel, ...attributes } };
  });
}

/** Runs `read` in the held directory `rel` is in; a path Datum would refuse, or one not there, is the problem. */
async function importAt<S extends FileSpec | DirectorySpec>(
  ctx: NodeContext,
  rel: string,
  what: string,
  read: (dir: HeldDir, name: string) => Promise<ImportResult<S>>,
): Promise<ImportResult<S>> {
  try {
    checkFileResourcePath(rel, what);
    const loc = await locateIn(ctx.root, rel, what, null);
    const found = await refusingSwaps(rel, what, false, () =>
      inLocatedDir(ctx.root, loc, rel, what, (dir) => read(dir, path.basename(loc.abs))),
    );
    return found ?? { problem: `nothing is at "${rel}"` };
  } catch (err) {
    if (err instanceof AgentRefusal) return { problem: err.message };
    if (isErrno(err, 'ENOENT')) return { problem: `nothing is at "${rel}"` };
    throw err;
  }
}

/** UTF-8 text without NUL bytes, or null: what desired state can hold as a file's content. */
function asText(bytes: Buffer): string | null {
  if (bytes.includes(0)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

/** Mode, owner and group as desired state declares them: names where the host has valid ones, else ids. */
async function attributesNow(
  type: 'file' | 'directory',
  rel: string,
  st: Stats,
): Promise<{ mode: string; owner: string; group: string } | { problem: string }> {
  const mode = modeText(st.mode);
  const refused = modeProblem(type, mode);
  if (refused) return { problem: `"${rel}" cannot be declared as it is: ${refused}` };
  const spelled = async (db: AccountDatabase, id: number, what: 'owner' | 'group') => {
    const name = await accountName(db, id);
    return accountProblem(what, name) === null ? name : String(id);
  };
  return { mode, owner: await spelled('passwd', st.uid, 'owner'), group: await spelled('group', st.gid, 'group') };
}
