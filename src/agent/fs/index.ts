/*
 * The agent's filesystem wing: the only code that touches a node's root. Everything else of the
 * agent (providers, the node's records, services, activities) reaches the root through what this
 * module exports; eslint.config.mjs lets `node:fs` be imported only here and in the files
 * src/agent/index.ts names, each with its reason.
 *
 *   held.ts       directories held open by descriptor: every entry reached through its parent,
 *                 never through a symlink; identity checked right before an irreversible step
 *   paths.ts      the path rules: inside the root, outside Datum's own areas, where a path really leads
 *   identity.ts   a target's identity: where its write lands, whatever its spelling
 *   files.ts      reads with caps, temp files, atomic writes, JSON records
 *   replace.ts    atomic replace of a file or flag, the replaced bytes kept under .datum/backup/
 *   attributes.ts a directory made, and mode, owner and group set, on held descriptors
 *   artifact.ts   an artifact fetched or copied into .datum/tmp, and inspected before it is unpacked
 *   unpack.ts     a tar archive written entry by entry through held descriptors
 *   releases.ts   releases/<version> made from an artifact, and the switch of `current`
 *   roots.ts      which directories may be a node root at all
 *   locks.ts      kernel locks (flock) on descriptors: one root, one agent
 *   registry.ts   the host's register of the roots its agents serve, by device and inode
 *   watch.ts      the watch's cheap stamps and inotify
 */

export { RECORD, fetchArtifact, inspectArchive } from './artifact';
export {
  atomicWriteAt,
  contentStamp,
  isSoleRegular,
  openAppendAt,
  readJsonAt,
  readdirOrEmpty,
  sha256,
  sha256Handle,
  writeJsonAt,
} from './files';
export {
  DirectorySwapped,
  FileTooLarge,
  HeldDir,
  NotRegularFile,
  OPEN_FLAGS,
  lstatAt,
  openRegular,
  readAll,
  readRegular,
  type Identity,
} from './held';
export { asSpelled, identify, resolveTarget, type Identify } from './identity';
export {
  checkFileResourcePath,
  inDatumDir,
  inLocatedDir,
  isErrno,
  isInside,
  kindOf,
  locate,
  locateIn,
  lstatOrNull,
  openLocatedDir,
  readLink,
  readLocated,
  realRoot,
  refusingSwaps,
  type ProtectedArea,
} from './paths';
export { openReleases, switchCurrent, unpackRelease } from './releases';
export { removeIn, replaceIn, type Replaced } from './replace';
export { rootCheckCounts, rootProblems } from './roots';
export { dirStamp, isDirectory, makeDirs, pathStamp, subdirsOf, watchDir } from './watch';
export { HeldLock, lockExclusive } from './locks';
export {
  ancestorIds,
  identityOf,
  registerRoot,
  registeredAt,
  registeredRoots,
  unregisterRoot,
  type RegisterReads,
  type RegisteredRoot,
} from './registry';
export { ensureDirectoryIn, setFileAttributesIn, type Wanted } from './attributes';
