import { sha256Hex } from '../canonical';
import type { FileSpec } from '../../contract/desired';
import { fileBytes, pathTarget, pathTargetProblem } from './common';
import { stringField, type ResourceKind } from './kind';

/*
 * file: the bytes at <root>/<path>, observed by their sha256 (null when absent). Written
 * atomically; the previous content is kept under .datum/backup/. Deleting a file is destructive.
 */

/** A file's target: its path under the root, separators normalised to "/". */
export const fileTarget = (path: string) => pathTarget('file', path);

export const file: ResourceKind<FileSpec> = {
  order: 1,
  actions: ['file.write'],
  destructive: ['file.delete'],
  target: (_key, spec) => fileTarget(spec.path),
  targetOfAction: (_key, spec) => {
    const path = stringField(spec, 'path');
    return path === null ? null : fileTarget(path);
  },
  targetIsKey: false,
  absenceIsFailure: false,
  targetNameProblem: (entry, rest) => pathTargetProblem('file', entry, rest),
  desiredValue: (_key, spec) => sha256Hex(fileBytes(spec.content)),
  written: (_key, spec) => sha256Hex(fileBytes(spec.content)),
  writtenByAction: (_kind, spec) => stringField(spec, 'sha256') ?? undefined,
  valueAfter: (_kind, spec) => spec.sha256,
  plan: (_a, spec) => {
    const content = fileBytes(spec.content);
    return { action: 'file.write', spec: { path: spec.path, content, sha256: sha256Hex(content) } };
  },
  dependencies: () => [],
  references: () => [],
};
