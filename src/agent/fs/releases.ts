import { linkSync, lstatSync, promises as fs, readlinkSync, renameSync, symlinkSync, unlinkSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { withFix } from '../../contract';
import { RECORD } from './artifact';
import { extractInto } from './unpack';
import { tempName, writeJsonAt } from './files';
import { DirectorySwapped, HeldDir, isCode, openDirChain, removeTree, sameIdentity, type Identity } from './held';
import { ABSENT_MARKER, linkMarker, sameMarker } from '../markers';
import { kindOf } from './paths';
import type { CheckedMarker } from '../markers';
import { AgentRefusal } from '../refusal';

/*
 * Installing a release beneath the root, in two steps that each end in one rename:
 *
 *   unpack   the archive goes into a staging directory made inside releases/ and held open
 *            (src/agent/fs/unpack.ts writes every entry through held descriptors), then, once
 *            releases/ is verified to still be the root's own (device, inode), the staging
 *            directory is renamed to releases/<version>, and the result checked to be it;
 *   switch   a new symlink "current -> releases/<version>" is renamed over `current` once the
 *            root, releases/ and releases/<version> are verified to be the very directories
 *            installed or found recorded, and `current` still carries the marker the agent's
 *            re-check saw (created by link() when absent, which fails if anything appeared).
 *
 * Swapping releases/ for a symlink (or moving it away) while an unpack runs therefore ends in a
 * refusal: nothing is installed outside the root, and `current` never points there.
 */

/** What a release unpack records. */
export interface ReleaseToInstall {
  version: string;
  sha256: string;
}

/** <root>/releases held open (a real directory, never a symlink); null when absent and not created. */
export async function openReleases(root: string, create: boolean): Promise<HeldDir | null> {
  try {
    return await openDirChain(root, ['releases'], create);
  } catch (err) {
    if (!create && isCode(err, 'ENOENT')) return null;
    if (err instanceof DirectorySwapped) throw swapped(err, 'nothing was read or written there');
    throw err;
  }
}

function swapped(err: DirectorySwapped, what: string): AgentRefusal {
  return new AgentRefusal(
    'PathOutsideRoot',
    withFix(
      `${err.message}, so ${what}; Datum keeps releases only in a real directory of the node root`,
      `find out who replaces "${err.shown}" and stop them; make it a real directory again`,
    ),
    { swapped: err.shown },
  );
}

/**
 * Unpacks the (verified, inspected) archive into releases/<version>. When another install of the
 * same version landed first, its identity is returned if it is the same release (`found`),
 * otherwise the collision is refused. Returns the identity of the release directory.
 */
export async function unpackRelease(
  root: string,
  release: ReleaseToInstall,
  archive: FileHandle,
  allowed: Map<string, string>,
  found: () => Promise<{ kind: string; record?: ReleaseToInstall; id?: Identity }>,
): Promise<Identity> {
  const releases = (await openReleases(root, true))!;
  const stagingName = tempName(release.version);
  let installed = false;
  try {
    await fs.mkdir(releases.at(stagingName), 0o755);
    const staging = await releases.child(stagingName, false, `releases/${stagingName}`);
    try {
      await extractInto(archive, staging, allowed);
      await writeJsonAt(staging, RECORD, { version: release.version, sha256: release.sha256 });
      await staging.handle.sync();
      // The last check and the rename, back to back.
      releases.verifySync();
      if (lstatSync(releases.at(release.version), { throwIfNoEntry: false }) === undefined) {
        renameSync(releases.at(stagingName), releases.at(release.version));
        installed = true;
      }
    } finally {
      await staging.close();
    }
    if (!installed) return await raced(release, found);
    const now = lstatSync(releases.at(release.version));
    if (!now.isDirectory() || !sameIdentity(now, staging.id)) throw new DirectorySwapped(`releases/${release.version}`);
    await releases.handle.sync();
    return staging.id;
  } catch (err) {
    if (err instanceof DirectorySwapped) throw swapped(err, 'the release was not installed');
    throw err;
  } finally {
    if (!installed) await removeTree(releases, stagingName); // only our own staging directory
    await releases.close();
  }
}

/** releases/<version> appeared while unpacking: reused when it is this very release, else refused. */
async function raced(
  release: ReleaseToInstall,
  found: () => Promise<{ kind: string; record?: ReleaseToInstall; id?: Identity }>,
): Promise<Identity> {
  const there = await found();
  if (there.kind === 'recorded' && there.record?.sha256 === release.sha256 && there.id) return there.id;
  throw new AgentRefusal(
    'DestructiveActionRefusal',
    withFix(
      `releases/${release.version} appeared while Datum unpacked it, holding something else, and Datum never replaces a release`,
      `move releases/${release.version} away by hand if it is not needed`,
    ),
  );
}

/**
 * The switch of `current` to releases/<version>, whose directory must still be `release`
 * (device, inode) in the root's own releases/; `checked` is the marker of `current` the agent's
 * re-check saw. Returns the marker the new link carries.
 */
export async function switchCurrent(root: string, version: string, release: Identity, checked: CheckedMarker): Promise<string> {
  const top = await HeldDir.open(root);
  try {
    const releases = await top.child('releases', false).catch((err: unknown) => {
      throw err instanceof DirectorySwapped ? swapped(err, '"current" was not switched') : err;
    });
    try {
      const tmp = tempName('current');
      symlinkSync(`releases/${version}`, top.at(tmp));
      try {
        lastCheck(top, releases, version, release, checked);
        const there = lstatSync(top.at('current'), { throwIfNoEntry: false });
        if (there === undefined) {
          linkSync(top.at(tmp), top.at('current'));
          unlinkSync(top.at(tmp));
        } else renameSync(top.at(tmp), top.at('current'));
      } catch (err) {
        await fs.rm(top.at(tmp), { force: true });
        if (isCode(err, 'EEXIST')) throw currentMoved(checked, 'something appeared there');
        throw err;
      } finally {
        await releases.close();
      }
      await top.handle.sync();
      const st = await fs.lstat(top.at('current'));
      return linkMarker(await fs.readlink(top.at('current')), st.ctimeMs);
    } catch (err) {
      if (err instanceof DirectorySwapped) throw swapped(err, '"current" was not switched');
      throw err;
    }
  } finally {
    await top.close();
  }
}

/** Right before the switch: the directories are the ones checked, and `current` is as the re-check saw it. */
function lastCheck(top: HeldDir, releases: HeldDir, version: string, release: Identity, checked: CheckedMarker): void {
  top.verifySync();
  releases.verifySync();
  const dir = lstatSync(releases.at(version), { throwIfNoEntry: false });
  if (!dir?.isDirectory() || !sameIdentity(dir, release)) throw new DirectorySwapped(`releases/${version}`);
  const there = lstatSync(top.at('current'), { throwIfNoEntry: false });
  if (there !== undefined && !there.isSymbolicLink())
    throw new AgentRefusal(
      'DestructiveActionRefusal',
      withFix(`"current" became a ${kindOf(there)}, and switching it would destroy it`, 'move "current" away by hand'),
    );
  const now = there === undefined ? ABSENT_MARKER : linkMarker(readlinkSync(top.at('current')), there.ctimeMs);
  if (typeof checked === 'string' && !sameMarker(now, checked)) throw currentMoved(checked, `its marker is now ${now}`);
}

function currentMoved(checked: CheckedMarker, now: string): AgentRefusal {
  return new AgentRefusal(
    'MarkerMoved',
    withFix(
      `MARKER_MOVED: "current" changed right before Datum's switch (marker ${checked ?? 'none'}; ${now}); another writer is at work, so it was not switched`,
      'Datum reports a conflicting writer; an operator decides with datum resolve --resolution retake|yield',
    ),
    { planned_marker: checked ?? null },
  );
}
