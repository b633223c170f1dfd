import { fchmodSync, fchownSync, lstatSync, mkdirSync, type Stats } from 'node:fs';
import path from 'node:path';
import { withFix } from '../../contract';
import { sha256Handle, notPermitted } from './files';
import { NotRegularFile, isCode, lstatAt, openRegular, type HeldDir } from './held';
import { ABSENT_MARKER, dirMarker, fileMarker, sameMarker, type CheckedMarker } from '../markers';
import { inDatumDir, kindOf } from './paths';
import { AgentRefusal } from '../refusal';

/*
 * Mode, owner and group set on the inode Datum checked, never through a link: the inode is held
 * open (a directory with O_DIRECTORY|O_NOFOLLOW through its parent's descriptor, a file with
 * O_NOFOLLOW|O_NONBLOCK), compared with the marker the plan saw, and changed with fchown/fchmod on
 * that descriptor right after a synchronous check that it still sits at its checked place (as a
 * rename in replace.ts). A descriptor follows its inode wherever it is renamed, even out of the
 * root: the check is what keeps a directory moved out, with a symlink left in its place, from
 * being changed out there.
 *
 * A regular file with a hard link that Datum did not make is refused: a link into the root to a
 * file outside it would otherwise hand the outside file's mode and owner to whoever writes desired
 * state. The only links Datum makes to a target are its backups under .datum/backup/.
 */

/** What to set on an inode; an absent field is left as it is. */
export interface Wanted {
  mode?: number;
  uid?: number;
  gid?: number;
}

/**
 * Where a test may pause: a directory seen by lstat and not yet opened; the inode open and
 * compared, its last check not made yet.
 */
export type AttributeStage = 'directory found' | 'directory opened' | 'file opened';

/**
 * A test seam, inert unless a test sets it: awaited at each stage above.
 * test/adversarial/dir-swapped-for-symlink.test.ts swaps the directory there, at the moments a
 * race would have to hit, and test/adversarial/hard-link-into-root.test.ts links the file.
 */
let pause: ((stage: AttributeStage, shown: string) => Promise<void>) | null = null;

export function pauseAttributesForTests(hook: typeof pause): void {
  pause = hook;
}

/** What an ensure or an attributes change found and left. */
export interface Changed {
  /** fstat of the inode after the change. */
  st: Stats;
  created: boolean;
  /** Whether anything had to be set. */
  changed: boolean;
}

/**
 * The directory `name` of a held directory, created when absent (through the parent's
 * descriptor, 0700 until its mode is set when a mode is declared, so it is never open wider than
 * asked), with `want` set on it as above.
 */
export async function ensureDirectoryIn(
  parent: HeldDir,
  name: string,
  shown: string,
  want: Wanted,
  checked: CheckedMarker,
): Promise<Changed> {
  const there = await lstatAt(parent, name);
  let created = false;
  if (there === null) {
    if (typeof checked === 'string' && checked !== ABSENT_MARKER) throw moved(shown, checked, ABSENT_MARKER);
    createIn(parent, name, shown, want.mode === undefined ? 0o755 : 0o700);
    created = true;
  } else if (!there.isDirectory()) throw notADirectory(shown, kindOf(there));
  else await pause?.('directory found', shown);
  let dir: HeldDir;
  try {
    dir = await parent.child(name, false, shown);
  } catch (err) {
    if (isCode(err, 'ENOENT')) throw moved(shown, checked ?? null, ABSENT_MARKER);
    throw err; // DirectorySwapped: the caller's refusingSwaps names it
  }
  try {
    const before = await dir.handle.stat();
    if (!created && typeof checked === 'string' && !sameMarker(dirMarker(before), checked))
      throw moved(shown, checked, dirMarker(before));
    await pause?.('directory opened', shown);
    const changed = setHeld(dir.handle.fd, before, want, () => dir.verifySync());
    return { st: await dir.handle.stat(), created, changed };
  } finally {
    await dir.close();
  }
}

/** mkdir through the parent's descriptor right after checking the parent is where it was; MarkerMoved when something appeared meanwhile. */
function createIn(parent: HeldDir, name: string, shown: string, mode: number): void {
  try {
    parent.verifySync();
    mkdirSync(parent.at(name), mode);
  } catch (err) {
    if (!isCode(err, 'EEXIST')) throw err;
    const now = lstatSync(parent.at(name), { throwIfNoEntry: false });
    throw moved(shown, ABSENT_MARKER, now ? (now.isDirectory() ? dirMarker(now) : fileMarker(now)) : ABSENT_MARKER);
  }
}

/** What a file's attributes change checks besides the marker: the content it expects, and where it keeps its backups. */
export interface FileAt {
  /** The resolved path under the root (its backups are .datum/backup/<target>.<stamp>). */
  target: string;
  sha256: string;
}

/**
 * Sets `want` on the regular file `name` of a held directory in place: its content and inode
 * kept. Refused for anything but a regular file, for content other than `at.sha256`, and for a
 * file with a hard link Datum did not make.
 */
export async function setFileAttributesIn(
  root: string,
  dir: HeldDir,
  name: string,
  shown: string,
  at: FileAt,
  want: Wanted,
  checked: CheckedMarker,
): Promise<Changed & { sha256: string }> {
  let opened;
  try {
    opened = await openRegular(dir.at(name), shown);
  } catch (err) {
    if (err instanceof NotRegularFile) throw notARegularFile(shown, err.kind);
    if (isCode(err, 'ENOENT')) throw moved(shown, checked ?? null, ABSENT_MARKER);
    throw err;
  }
  const { handle, st } = opened;
  try {
    const sha256 = await sha256Handle(handle);
    const found = fileMarker(st, sha256);
    if (typeof checked === 'string' && !sameMarker(found, checked)) throw moved(shown, checked, found);
    if (sha256 !== at.sha256) throw otherContent(shown, sha256, at.sha256);
    const ours = st.nlink > 1 ? await backupLinks(root, at.target, st) : 0;
    if (st.nlink - ours > 1) throw hardLinked(shown, st.nlink, ours);
    await pause?.('file opened', shown);
    const changed = setHeld(handle.fd, st, want, () => {
      dir.verifySync();
      // Still this inode at its name, with no link made since the count above.
      const now = lstatSync(dir.at(name), { throwIfNoEntry: false });
      if (!now || now.ino !== st.ino || now.dev !== st.dev) throw moved(shown, found, now ? fileMarker(now) : ABSENT_MARKER);
      if (now.nlink - ours > 1) throw hardLinked(shown, now.nlink, ours);
    });
    return { st: await handle.stat(), created: false, changed, sha256 };
  } finally {
    await handle.close();
  }
}

/**
 * Sets `want` on the inode `fd` holds, right after `verify` (synchronous: nothing of the agent's
 * runs between the check and the change). Owner and group first: chown clears a file's setuid
 * and setgid bits, and the declared mode is then set exactly; with no mode declared, none is set
 * (a cleared setuid bit stays cleared). False when nothing differed.
 */
function setHeld(fd: number, st: Stats, want: Wanted, verify: () => void): boolean {
  const chown = (want.uid !== undefined && want.uid !== st.uid) || (want.gid !== undefined && want.gid !== st.gid);
  const chmod = want.mode !== undefined && want.mode !== (st.mode & 0o7777);
  if (!chown && !chmod) return false;
  verify();
  try {
    if (chown) fchownSync(fd, want.uid ?? -1, want.gid ?? -1);
    if (want.mode !== undefined) fchmodSync(fd, want.mode);
  } catch (err) {
    if (isCode(err, 'EPERM'))
      throw notPermitted(chown ? 'give the inode' : 'set', { uid: want.uid, gid: want.gid, mode: want.mode });
    throw err;
  }
  return true;
}

/** How many of a file's links are Datum's own backups of `target` (a write that died between its backup and its rename leaves one). */
async function backupLinks(root: string, target: string, st: Stats): Promise<number> {
  const dir = path.dirname(target);
  const prefix = `${path.basename(target)}.`;
  return await inDatumDir(
    root,
    dir === '.' ? 'backup' : `backup/${dir}`,
    false,
    async (backups) => {
      let n = 0;
      for (const entry of await backups.entries()) {
        if (!entry.startsWith(prefix)) continue;
        const b = await lstatAt(backups, entry);
        if (b !== null && b.ino === st.ino && b.dev === st.dev) n++;
      }
      return n;
    },
    0,
  );
}

function hardLinked(shown: string, links: number, ours: number): AgentRefusal {
  return new AgentRefusal(
    'PathOutsideRoot',
    withFix(
      `"${shown}" has ${links} hard links${ours > 0 ? ` (${ours} of them Datum's backups)` : ''}, so the same file has another name that Datum did not make, perhaps outside the node root; changing its mode or owner would change it there too, so nothing was changed`,
      `find out why "${shown}" is hard-linked and remove the other link, or replace "${shown}" with a copy of its own (cp, then mv over it)`,
    ),
    { path: shown, links, backup_links: ours },
  );
}

function notADirectory(shown: string, kind: string): AgentRefusal {
  return new AgentRefusal(
    'DestructiveActionRefusal',
    withFix(
      `"${shown}" is a ${kind}, not a directory; making it the directory would destroy what is there`,
      `move "${shown}" away by hand if it is not needed, then let Datum make the directory`,
    ),
    { path: shown, kind },
  );
}

function notARegularFile(shown: string, kind: string): AgentRefusal {
  return new AgentRefusal(
    'InvalidAction',
    withFix(
      `"${shown}" is a ${kind}, not a regular file; file.attributes sets a regular file's mode, owner and group only`,
      're-plan from the desired state: the next observation reports what is there',
    ),
    { path: shown, kind },
  );
}

function otherContent(shown: string, found: string, expected: string): AgentRefusal {
  return new AgentRefusal(
    'InvalidAction',
    withFix(
      `"${shown}" holds content with sha256 ${found}, not the ${expected} the action sets attributes for`,
      're-plan from the desired state: changed content is written by file.write',
    ),
    { path: shown, sha256: found, expected },
  );
}

/** Found changed at the last look: nothing was set. */
function moved(shown: string, planned: string | null, now: string): AgentRefusal {
  return new AgentRefusal(
    'MarkerMoved',
    withFix(
      `MARKER_MOVED: "${shown}" changed right before Datum's change (marker ${planned ?? 'none'}, now ${now}); another writer is at work, and changing it now would lose its change, so nothing was changed`,
      'Datum reports a conflicting writer; an operator decides with datum resolve --resolution retake|yield',
    ),
    { path: shown, planned_marker: planned, current_marker: now },
  );
}
