/*
 * The agent's reach into the host's package manager (dpkg, and apt for the host's sources): the
 * only code that runs dpkg, dpkg-query, dpkg-deb or apt-get. Every run names its root explicitly
 * (dpkg's --root, which agent.yaml's packages.root sets and which never overlaps a node root), in
 * an environment of the agent's making, killed with its activity.
 *
 *   run.ts        how a tool runs: environment, process group, timeout, cancellation, output tail
 *   busy.ts       whether a dpkg or apt works on a database now (its locks in /proc/locks)
 *   query.ts      dpkg's database through dpkg-query; a .deb's own fields through dpkg-deb
 *   relations.ts  Debian versions and Conflicts/Breaks: what would have to go for an install
 *   install.ts    dpkg --install of a verified .deb; apt's index of name=version, apt-get install
 */

export { aptCandidate, aptInstall, dpkgInstall } from './install';
export {
  DpkgUnreadable,
  NOT_INSTALLED,
  admindirOf,
  architectures,
  debFields,
  installedRelations,
  packageMarker,
  packageRecord,
  type PackageEntry,
  type PackageRecord,
} from './query';
export { untilDpkgIdle } from './busy';
export { standingInTheWay, type InTheWay } from './relations';
export { lastLines, type ToolRun } from './run';
