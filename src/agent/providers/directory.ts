import path from 'node:path';
import { z } from 'zod';
import { modeText } from '../../domain/resources';
import type { DirectorySpec, ObservedResource } from '../../domain';
import { attributesOf } from '../../domain/resources';
import {
  checkFileResourcePath,
  dirStamp,
  ensureDirectoryIn,
  inLocatedDir,
  isErrno,
  kindOf,
  locateIn,
  lstatAt,
  refusingSwaps,
  type HeldDir,
} from '../fs';
import { ABSENT_MARKER, dirMarker, fileMarker, linkMarker } from '../markers';
import { withFix } from '../../contract';
import { AgentRefusal } from '../refusal';
import { observedAttributes, wantedOf } from './attributes';
import { inHeldParent } from './file';
import { importDirectory } from './imports';
import { observeGuarded, observed, specOf, type ApplyResult, type AtWrite, type NodeContext, type Provider } from './types';

/*
 * directory: what is at <root>/<path>: null when nothing is, exactly its declared attributes when
 * a directory is ({} when it declares none), an obstruction when anything else is (making it a
 * directory would destroy it). Its marker is the directory's inode, mode, owner and group
 * (src/agent/markers.ts says why not its times). directory.ensure creates it through its parent's
 * held descriptor and sets mode, owner and group on the held directory (src/agent/fs/attributes.ts);
 * deleting a directory is destructive and never done.
 */

const WHAT = 'directory path';

export const directoryEnsureSpec = z.strictObject({
  path: z.string(),
  mode: z.string().optional(),
  owner: z.string().optional(),
  group: z.string().optional(),
});

/** What observe needs of a directory: its path and what it declares. */
type DirectoryObserved = Pick<DirectorySpec, 'path' | 'mode' | 'owner' | 'group'>;

export const directoryProvider: Provider<DirectorySpec> = {
  actions: ['directory.ensure'],
  destructive: ['directory.delete'],
  observe: (ctx, _key, spec) => observeDirectory(ctx, spec),
  apply: (ctx, action, atWrite) => applyEnsure(ctx, action.resource_key, specOf(action, directoryEnsureSpec), atWrite),
  targetNow: (ctx, action) => observeDirectory(ctx, specOf(action, directoryEnsureSpec)),
  watch: {
    // Its parent's inotify reports a chmod or chown of it (IN_ATTRIB), not the files written inside it.
    marker: (root, _key, spec) => dirStamp(path.join(root, spec.path)),
    dirs: (root, _key, spec) => [path.dirname(path.join(root, spec.path))],
  },
  importSpec: (ctx, _key, name) => importDirectory(ctx, name),
};

export async function observeDirectory(ctx: NodeContext, spec: DirectoryObserved): Promise<ObservedResource> {
  const detail = { path: spec.path };
  return await observeGuarded('directory', detail, async () => {
    try {
      checkFileResourcePath(spec.path, WHAT);
      const loc = await locateIn(ctx.root, spec.path, WHAT, null);
      const seen = await refusingSwaps(spec.path, WHAT, false, () =>
        inLocatedDir(ctx.root, loc, spec.path, WHAT, (parent) => directoryIn(parent, path.basename(loc.abs), spec)),
      );
      return seen ?? observed('directory', null, ABSENT_MARKER, { ...detail, kind: 'absent' });
    } catch (err) {
      if (!(err instanceof AgentRefusal)) throw err;
      // As for a file: a path leaving the root, or into Datum's own areas, is refused when
      // planned (that refusal names it), not an obstruction; a file where a parent should be is one.
      if (err.type === 'PathOutsideRoot' || err.type === 'ProtectedAreaRefusal')
        return observed('directory', null, null, { ...detail, refusal: err.type, path_error: err.message });
      return observed('directory', null, null, { ...detail, refusal: err.type }, err.message);
    }
  });
}

/** The entry `name` of a held directory as a directory resource sees it. */
async function directoryIn(parent: HeldDir, name: string, spec: DirectoryObserved): Promise<ObservedResource> {
  const detail = { path: spec.path };
  const st = await lstatAt(parent, name);
  if (st === null) return observed('directory', null, ABSENT_MARKER, { ...detail, kind: 'absent' });
  if (!st.isDirectory()) {
    const kind = kindOf(st);
    // The watch's stamp of the same entry (pathStamp), so an obstruction left alone does not wake it.
    const link = st.isSymbolicLink() ? await parent.readlink(name).catch(() => null) : null;
    return observed(
      'directory',
      null,
      link === null ? fileMarker(st) : linkMarker(link, st.ctimeMs),
      { ...detail, kind },
      withFix(
        `"${spec.path}" is a ${kind}, not a directory; making it the directory would destroy what is there`,
        `move "${spec.path}" away by hand if it is not needed, then let Datum make the directory`,
      ),
    );
  }
  let dir: HeldDir;
  try {
    dir = await parent.child(name, false, spec.path);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return observed('directory', null, ABSENT_MARKER, { ...detail, kind: 'absent' });
    throw err;
  }
  try {
    const fst = await dir.handle.stat();
    const value = await observedAttributes(attributesOf(spec), fst);
    return observed('directory', value, dirMarker(fst), {
      ...detail,
      kind: 'directory',
      mode: modeText(fst.mode),
      uid: fst.uid,
      gid: fst.gid,
    });
  } finally {
    await dir.close();
  }
}

async function applyEnsure(
  ctx: NodeContext,
  resourceKey: string,
  spec: z.infer<typeof directoryEnsureSpec>,
  atWrite: AtWrite,
): Promise<ApplyResult> {
  checkFileResourcePath(spec.path, WHAT);
  const want = await wantedOf('directory', spec, `directory.ensure of "${resourceKey}"`);
  const done = await inHeldParent(ctx, 'directory', spec.path, true, (parent, name) =>
    atWrite((checked) => ensureDirectoryIn(parent, name, spec.path, want, checked)),
  );
  const declared = Object.entries(attributesOf(spec)).map(([k, v]) => `${k} ${v}`);
  const what = declared.length === 0 ? '' : ` with ${declared.join(', ')}`;
  return {
    marker_after: dirMarker(done.st),
    detail: done.created
      ? `created the directory ${spec.path}${what}.`
      : done.changed
        ? `set ${declared.join(', ')} on the directory ${spec.path} (inode ${done.st.ino} kept).`
        : `the directory ${spec.path} was already there${what}; nothing was changed.`,
  };
}
