import { sha256Hex, type Json } from '../canonical';
import type { FileSpec } from '../../contract/desired';
import { attributesOf, type Attributes } from './attributes';
import { fileBytes, pathTarget, pathTargetProblem } from './common';
import { stringField, type ResourceKind } from './kind';

/*
 * file: the bytes at <root>/<path>, observed by their sha256 (null when absent). Written
 * atomically; the previous content is kept under .datum/backup/. Deleting a file is destructive.
 *
 * A file that declares mode, owner or group is observed as {sha256, mode?, owner?, group?} (the
 * declared ones only); one that declares none keeps the plain sha256, so the digests, ledgers and
 * histories of files written before attributes existed do not change. Changed content is written
 * with the declared attributes already on the new inode; attributes alone are set in place
 * (file.attributes), the content and the inode kept.
 */

/** A file's target: its path under the root, separators normalised to "/". */
export const fileTarget = (path: string) => pathTarget('file', path);

/** A file's value: the content's sha256, with the declared attributes when there are any. */
function fileValue(sha256: string, attributes: Attributes): Json {
  return Object.keys(attributes).length === 0 ? sha256 : { sha256, ...attributes };
}

/** The sha256 of a file's content from its value, in either shape (what a service loads is the bytes). */
export function fileContentDigest(value: Json): Json {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value.sha256 ?? null;
  return value;
}

const ofAction = (spec: { readonly [field: string]: Json | undefined }) => {
  const sha256 = stringField(spec, 'sha256');
  return sha256 === null ? undefined : fileValue(sha256, attributesOf(spec));
};

export const file: ResourceKind<FileSpec> = {
  order: 1,
  actions: ['file.write', 'file.attributes'],
  destructive: ['file.delete'],
  target: (_key, spec) => fileTarget(spec.path),
  targetOfAction: (_key, spec) => {
    const path = stringField(spec, 'path');
    return path === null ? null : fileTarget(path);
  },
  targetIsKey: false,
  targetIsPath: true,
  absenceIsFailure: false,
  targetNameProblem: (entry, rest) => pathTargetProblem('file', entry, rest),
  desiredValue: (_key, spec) => fileValue(sha256Hex(fileBytes(spec.content)), attributesOf(spec)),
  written: (_key, spec) => fileValue(sha256Hex(fileBytes(spec.content)), attributesOf(spec)),
  writtenByAction: (_kind, spec) => ofAction(spec),
  valueAfter: (_kind, spec) => ofAction(spec),
  plan: (a, spec) => {
    const content = fileBytes(spec.content);
    const sha256 = sha256Hex(content);
    const attributes = attributesOf(spec);
    // The right bytes with the wrong mode or owner: set those in place, never rewrite the content.
    const seen = a.observed?.value;
    if (Object.keys(attributes).length > 0 && fileContentDigest(seen ?? null) === sha256)
      return { action: 'file.attributes', spec: { path: spec.path, sha256, ...attributes } };
    return { action: 'file.write', spec: { path: spec.path, content, sha256, ...attributes } };
  },
  dependencies: () => [],
  references: () => [],
};
