/*
 * Over 450 lines, left whole for now: the spelling rules and the held-descriptor walk are one
 * safety argument (a path is checked, then walked without following what it was checked as);
 * the cut along that seam needs its own review of the fs adversary's cases.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { RESERVED_ROOT_ENTRIES, lengthProblem, nodePathProblem, pathSpellingProblem } from '../../domain';
import { clip } from '../../domain/bounds';
import { withFix } from '../../contract';
import { DirectorySwapped, kindOfStats, openDirChain, type HeldDir } from './held';
import { AgentRefusal } from '../refusal';
import { registeredAt } from './registry';

/*
 * Keeping every byte inside the node root. Paths are checked twice: by their spelling (absolute,
 * "..") and by what is really on disk (a symlinked directory inside the root that points out of
 * it). Only after both checks does any provider create or write anything.
 */

/** The real path of the node root; created first when `create` (apply), as-is when absent (observe). */
export async function realRoot(root: string, create: boolean): Promise<string> {
  if (create) await fs.mkdir(root, { recursive: true });
  try {
    return await fs.realpath(root);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return path.resolve(root); // nothing there yet: everything is absent
    throw err;
  }
}

export function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

/**
 * Refuses a relative path whose spelling could leave the root, or that is not a plain
 * relative path at all. Only the spelling: the symlinks on disk are `locate`'s job.
 */
export function checkSpelling(rel: string, what: string): void {
  const problem = pathSpellingProblem(rel);
  if (problem === null) return;
  const fix = 'write a path relative to the node root without ".." segments, such as "etc/app/config.json"';
  if (problem === 'absolute') {
    throw new AgentRefusal(
      'PathOutsideRoot',
      withFix(`${what} "${rel}" is an absolute path and would leave the node root`, fix),
      { path: rel },
    );
  }
  if (problem === 'parent_segment') {
    throw new AgentRefusal('PathOutsideRoot', withFix(`${what} "${rel}" has a ".." segment and could leave the node root`, fix), {
      path: rel,
    });
  }
  if (problem === 'too_long' || problem === 'segment_too_long' || problem === 'name_too_long') {
    throw new AgentRefusal(
      'InvalidAction',
      withFix(`${what} ${lengthProblem(rel)}`, 'shorten the path in desired state; nothing is read or written there'),
      { path: clip(rel, 60) },
    );
  }
  throw new AgentRefusal('InvalidAction', withFix(`${what} "${rel}" is not a plain relative path (empty, "." or NUL)`, fix), {
    path: rel,
  });
}

/**
 * A file or directory resource's path: the spelling checks plus the domain's rule that Datum's
 * own entries (.datum, releases, current, flags) are not writable as files or directories — a
 * resource that could rewrite the journal or the fence, or chmod .datum, would defeat both.
 */
export function checkFileResourcePath(rel: string, what = 'file path'): void {
  checkSpelling(rel, what);
  const problem = nodePathProblem(rel);
  if (problem)
    throw new AgentRefusal(
      'InvalidAction',
      withFix(`${what} ${problem}`, 'choose a path outside .datum, releases, current and flags'),
      { path: rel },
    );
}

export interface Located {
  /** Where the entry is, with every existing parent directory resolved to its real path. */
  abs: string;
  /** Real path of the deepest existing parent, followed by the parents still to create. */
  dir: string;
  /** Parent directories that do not exist yet, outermost first (absolute). */
  missing: string[];
  /** The symlinked parents followed on the way, as spelled in the path ("alias", "etc/conf"). */
  via: string[];
}

/**
 * Resolves `rel` under the real root, following symlinked parent directories only while they
 * stay inside the root. The final component is not followed: providers lstat it themselves
 * (a symlink there is an obstruction, not a path to write through).
 *
 * Throws AgentRefusal: PathOutsideRoot when a parent leaves the root, DestructiveActionRefusal
 * when a parent is a file (making it a directory would destroy it).
 */
export async function locate(root: string, rel: string, what = 'path'): Promise<Located> {
  checkSpelling(rel, what);
  const segments = rel.split('/');
  const name = segments.pop()!;
  let dir = root;
  const via: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const next = path.join(dir, segments[i]);
    const shown = segments.slice(0, i + 1).join('/');
    const st = await lstatOrNull(next);
    if (st === null) {
      const missing = segments.slice(i).map((_, j) => path.join(dir, ...segments.slice(i, i + j + 1)));
      return { abs: path.join(missing[missing.length - 1], name), dir: missing[missing.length - 1], missing, via };
    }
    if (st.isSymbolicLink()) {
      dir = await throughParentLink(root, dir, next, { rel, shown, what });
      await refuseOtherRoot(await fs.stat(dir), { rel, shown, what });
      via.push(shown);
      continue;
    }
    if (!st.isDirectory()) {
      throw new AgentRefusal(
        'DestructiveActionRefusal',
        withFix(
          `${what} "${rel}" needs "${shown}" to be a directory, but it is a ${kindOf(st)}; replacing it would destroy it`,
          `move "${shown}" away by hand if it is not needed`,
        ),
        { path: rel, blocking: shown },
      );
    }
    await refuseOtherRoot(st, { rel, shown, what });
    dir = next;
  }
  return { abs: path.join(dir, name), dir, missing: [], via };
}

/**
 * A directory below the root that is another node's root, recognised by identity (device and
 * inode in the host's register: a bind mount, or a root moved in after both agents started), is
 * never gone through: one node never reads or writes another's.
 */
async function refuseOtherRoot(
  st: { dev: number; ino: number },
  at: { rel: string; shown: string; what: string },
): Promise<void> {
  const other = await registeredAt({ dev: st.dev, ino: st.ino });
  if (other === null) return;
  throw new AgentRefusal(
    'PathOutsideRoot',
    withFix(
      `${at.what} "${at.rel}" goes through "${at.shown}", which is the root of node ${other.node} (served by pid ${other.pid}), and one node never reaches into another's`,
      `move "${at.shown}" out of this node's root, or give the path another directory`,
    ),
    { path: at.rel, through: at.shown, other_node: other.node },
  );
}

/**
 * A parent directory that is a symlink is followed only when it stays inside the root, judged
 * both by where it points and by where it really leads, and only to a directory.
 */
async function throughParentLink(
  root: string,
  dir: string,
  link: string,
  at: { rel: string; shown: string; what: string },
): Promise<string> {
  const { rel, shown, what } = at;
  let target: string;
  try {
    target = await fs.readlink(link);
  } catch (err) {
    // A symlink a moment ago and not now: another process is reshaping the path under Datum.
    if (!isErrno(err, 'EINVAL') && !isErrno(err, 'ENOENT')) throw err;
    throw new AgentRefusal(
      'PathOutsideRoot',
      withFix(
        `${what} "${rel}" goes through "${shown}", which changed while Datum followed it, so nothing was read or written there`,
        `find out who replaces "${shown}" and stop them; the next pass looks again`,
      ),
      { path: rel, swapped: shown },
    );
  }
  const lexical = path.resolve(dir, target);
  let real: string;
  try {
    real = await fs.realpath(link);
  } catch (err) {
    if (!isErrno(err, 'ENOENT') && !isErrno(err, 'ELOOP')) throw err;
    real = lexical; // dangling: judge by where it would point
  }
  if (!isInside(root, real) || !isInside(root, lexical)) {
    throw new AgentRefusal(
      'PathOutsideRoot',
      withFix(
        `${what} "${rel}" goes through "${shown}", a symlink to ${target} outside the node root`,
        `replace the symlink "${shown}" with a directory inside the node root`,
      ),
      { path: rel, symlink: shown, target },
    );
  }
  const realSt = await statOrNull(real);
  if (realSt === null || !realSt.isDirectory()) {
    throw new AgentRefusal(
      'DestructiveActionRefusal',
      withFix(
        `${what} "${rel}" goes through "${shown}", a symlink to ${target} that is not a directory`,
        `make "${shown}" a directory, or remove the symlink by hand`,
      ),
      { path: rel, symlink: shown, target },
    );
  }
  return real;
}

/**
 * A directory of the agent's own state, `<root>/.datum/<sub>` ("" for .datum itself), held open:
 * checked to lead really into .datum, reached without following a symlink, created when
 * `create`. Null when absent and not created. Everything Datum reads or writes there goes through
 * it, so a .datum (or a directory of it) swapped for a symlink meanwhile is refused, not followed.
 */
export async function openDatumDir(root: string, sub: string, create: boolean): Promise<HeldDir | null> {
  const rel = sub === '' ? '.datum/_' : `.datum/${sub}/_`;
  const loc = await locateIn(root, rel, 'agent state path', '.datum');
  if (!create && loc.missing.length > 0) return null;
  try {
    return await openChecked(root, loc, rel, 'agent state path', create);
  } catch (err) {
    if (!create && isErrno(err, 'ENOENT')) return null; // removed since it was located
    throw err;
  }
}

/** Runs `fn` in `<root>/.datum/<sub>` (openDatumDir), closing it after; `absent` when it is not there. */
export async function inDatumDir<T>(
  root: string,
  sub: string,
  create: boolean,
  fn: (dir: HeldDir) => Promise<T>,
  absent: T,
): Promise<T> {
  const dir = await openDatumDir(root, sub, create);
  if (dir === null) return absent;
  try {
    return await refusingSwaps(`.datum/${sub}`, 'agent state path', create, () => fn(dir));
  } finally {
    await dir.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Protected areas, judged by where a path really leads, never by how it is spelled: with
// "alias -> ." inside the root, "alias/.datum/fence.json" is spelled outside .datum and leads
// into it.

export type ProtectedArea = '.datum' | 'releases' | 'current' | 'flags';
export const PROTECTED_AREAS = RESERVED_ROOT_ENTRIES as readonly ProtectedArea[];

const AREA_ROLE: Record<ProtectedArea, string> = {
  '.datum': "the agent's own state: the fence, the journal, the service records and the backups",
  releases: 'the unpacked releases',
  current: 'the link to the current release',
  flags: 'the flags, each managed as its own flag resource',
};

/** The protected area of the (real) root that `abs` (a resolved path) lies in, or null. */
export function areaOf(root: string, abs: string): ProtectedArea | null {
  for (const area of PROTECTED_AREAS) if (isInside(path.join(root, area), abs)) return area;
  return null;
}

/**
 * The protected area a located path reaches under another name: a directory on its way, or the
 * entry itself, that is (device and inode) one of the root's areas. A second name is not a
 * symlink, so `locate` cannot see it: a case-insensitive filesystem (".DATUM" is ".datum"), or
 * a bind mount of .datum elsewhere in the root.
 */
async function areaByIdentity(root: string, loc: Located): Promise<ProtectedArea | null> {
  const areas = new Map<string, ProtectedArea>();
  for (const area of PROTECTED_AREAS) {
    const st = await lstatOrNull(path.join(root, area));
    if (st) areas.set(`${st.dev}:${st.ino}`, area);
  }
  if (areas.size === 0) return null;
  const deepest = loc.missing.length > 0 ? path.dirname(loc.missing[0]) : loc.dir;
  const candidates = loc.missing.length > 0 ? [] : [loc.abs];
  for (let dir = deepest; dir !== root && isInside(root, dir); dir = path.dirname(dir)) candidates.push(dir);
  for (const candidate of candidates) {
    // A name too long, or a loop of symlinks swapped in meanwhile, is not a second name of an area.
    const st = await lstatOrNull(candidate).catch(() => null);
    const area = st ? areas.get(`${st.dev}:${st.ino}`) : undefined;
    if (area !== undefined) return area;
  }
  return null;
}

/**
 * `locate`, then the resolved path must lie in `area` (null: in none of them). A file resource
 * may write nowhere Datum keeps its own state; a flag only in flags/, a release only in
 * releases/, the agent's state only in .datum/ (so "flags -> .datum" cannot turn a flag write
 * into a journal write either).
 */
export async function locateIn(root: string, rel: string, what: string, area: ProtectedArea | null): Promise<Located> {
  const loc = await locate(root, rel, what);
  const found = areaOf(root, loc.abs) ?? (area === null ? await areaByIdentity(root, loc) : null);
  if (found === area) return loc;
  const resolved = path.relative(root, loc.abs);
  const links = loc.via.length ? ` through the symlink${loc.via.length > 1 ? 's' : ''} "${loc.via.join('", "')}"` : '';
  if (found !== null) {
    throw new AgentRefusal(
      'ProtectedAreaRefusal',
      withFix(
        `${what} "${rel}" leads${links} to "${resolved}", inside "${found}" (${AREA_ROLE[found]}), which ${area === null ? 'Datum manages itself' : `a ${what} may not reach`}`,
        loc.via.length
          ? `replace the symlink "${loc.via[loc.via.length - 1]}" with a real directory, or choose a path that stays out of .datum, releases, current and flags`
          : 'choose a path outside .datum, releases, current and flags',
      ),
      { path: rel, resolved, area: found, via: loc.via },
    );
  }
  throw new AgentRefusal(
    'ProtectedAreaRefusal',
    withFix(
      `${what} "${rel}" leads${links} to "${resolved}", outside "${area}", where Datum keeps it`,
      `make "${area}" a real directory of the node root (not a symlink), so it holds what Datum writes there`,
    ),
    { path: rel, resolved, area },
  );
}

/**
 * Opens the directory a located path is in, from the root down, one directory at a time through
 * the previous one's descriptor and never through a symlink, creating the missing ones. What is
 * written through it lands in the directory that was checked, whatever is swapped meanwhile.
 */
export async function openLocatedDir(root: string, loc: Located, rel: string, what: string): Promise<HeldDir> {
  return await openChecked(root, loc, rel, what, true);
}

/**
 * Calls `read` with the entry's path inside its held directory (/proc/self/fd/<fd>/<name>), so
 * observing follows no symlink swapped in after the check either; null when a parent is absent.
 * Nothing is created.
 */
export async function readLocated<T>(
  root: string,
  loc: Located,
  rel: string,
  what: string,
  read: (entry: string) => Promise<T>,
): Promise<T | null> {
  return await inLocatedDir(root, loc, rel, what, (dir) => read(dir.at(path.basename(loc.abs))));
}

/** Calls `fn` with the located path's directory held open (as readLocated); null when it is absent. */
export async function inLocatedDir<T>(
  root: string,
  loc: Located,
  rel: string,
  what: string,
  fn: (dir: HeldDir) => Promise<T>,
): Promise<T | null> {
  if (loc.missing.length > 0) return null;
  let dir: HeldDir;
  try {
    dir = await openChecked(root, loc, rel, what, false);
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return null; // removed since it was located
    throw err;
  }
  try {
    return await fn(dir);
  } finally {
    await dir.close();
  }
}

async function openChecked(root: string, loc: Located, rel: string, what: string, create: boolean): Promise<HeldDir> {
  const inside = path.relative(root, loc.dir);
  const segments = inside === '' ? [] : inside.split(path.sep);
  return await refusingSwaps(rel, what, create, () => openDirChain(root, segments, create));
}

/**
 * Runs `work` (which opens, reads or writes through held directories) with a directory found
 * swapped, at the open or at the last check before an irreversible step, refused as
 * PathOutsideRoot; and with a name longer than the filesystem allows refused as InvalidAction:
 * neither is a failure a retry could mend.
 */
export async function refusingSwaps<T>(rel: string, what: string, writing: boolean, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (isErrno(err, 'ELOOP'))
      throw new AgentRefusal(
        'PathOutsideRoot',
        withFix(
          `${what} "${rel}" leads through a loop of symlinks (ELOOP), perhaps one swapped in while Datum looked`,
          'replace the symlinks on the path with real directories; the next pass looks again',
        ),
        { path: rel, errno: 'ELOOP' },
      );
    if (isErrno(err, 'ENAMETOOLONG'))
      throw new AgentRefusal(
        'InvalidAction',
        withFix(
          `${what} "${rel}" has a name longer than the filesystem allows (ENAMETOOLONG)`,
          'shorten the path in the desired state (each segment at most 255 bytes)',
        ),
        { path: rel, errno: 'ENAMETOOLONG' },
      );
    if (!(err instanceof DirectorySwapped)) throw err;
    const nothing = writing
      ? 'the write could land outside the directory Datum checked; nothing was written'
      : 'what is read there could come from outside the directory Datum checked; nothing was read';
    throw new AgentRefusal(
      'PathOutsideRoot',
      withFix(
        `${what} "${rel}": ${err.message}, so ${nothing}`,
        `find out who replaces "${err.shown}" and stop them; the next pass ${writing ? 'writes' : 'reads'} once it is a directory again`,
      ),
      { path: rel, swapped: err.shown },
    );
  }
}

export const kindOf = kindOfStats;

export async function lstatOrNull(p: string) {
  try {
    return await fs.lstat(p);
  } catch (err) {
    if (isErrno(err, 'ENOENT') || isErrno(err, 'ENOTDIR')) return null;
    throw err;
  }
}

/** The target of the symlink at `p` (EINVAL when it is not one). */
export async function readLink(p: string): Promise<string> {
  return await fs.readlink(p);
}

export async function statOrNull(p: string) {
  try {
    return await fs.stat(p);
  } catch (err) {
    if (isErrno(err, 'ENOENT') || isErrno(err, 'ENOTDIR') || isErrno(err, 'ELOOP')) return null;
    throw err;
  }
}

export function isErrno(err: unknown, code: string): boolean {
  return err instanceof Error && (err as NodeJS.ErrnoException).code === code;
}
