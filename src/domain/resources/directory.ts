import type { DirectorySpec } from '../../contract/desired';
import { attributesOf } from './attributes';
import { pathTarget, pathTargetProblem } from './common';
import { stringField, type ResourceKind } from './kind';

/*
 * directory: a directory at <root>/<path>, observed as null when nothing is there and otherwise
 * as exactly its declared attributes ({} when it declares none; {mode: "0750", owner: "daemon"}).
 * Something else at the path (a file, a symlink) is an obstruction: making it a directory would
 * destroy it. Created when absent, its mode, owner and group set through a held descriptor;
 * deleting a directory is destructive. Ordered before files, so a file declared inside it is
 * written once the directory has its mode and owner.
 */

/** A directory's target: its path under the root, separators normalised to "/". */
export const directoryTarget = (path: string) => pathTarget('directory', path);

export const directory: ResourceKind<DirectorySpec> = {
  order: 0,
  actions: ['directory.ensure'],
  destructive: ['directory.delete'],
  target: (_key, spec) => directoryTarget(spec.path),
  targetOfAction: (_key, spec) => {
    const path = stringField(spec, 'path');
    return path === null ? null : directoryTarget(path);
  },
  targetIsKey: false,
  targetIsPath: true,
  absenceIsFailure: false,
  targetNameProblem: (entry, rest) => pathTargetProblem('directory', entry, rest),
  desiredValue: (_key, spec) => attributesOf(spec),
  written: (_key, spec) => attributesOf(spec),
  writtenByAction: (_kind, spec) => (stringField(spec, 'path') === null ? undefined : attributesOf(spec)),
  valueAfter: (_kind, spec) => (stringField(spec, 'path') === null ? undefined : attributesOf(spec)),
  plan: (_a, spec) => ({ action: 'directory.ensure', spec: { path: spec.path, ...attributesOf(spec) } }),
  dependencies: () => [],
  references: () => [],
};
