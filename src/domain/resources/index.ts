import type { ResourceSpec } from '../../contract/desired';
import type { ResourceType } from '../../contract/vocabulary';
import { directory } from './directory';
import { file } from './file';
import { flag } from './flag';
import type { ResourceKind } from './kind';
import { packageKind } from './package';
import { release } from './release';
import { service } from './service';
import { unit } from './unit';

/*
 * The resource types, one entry each: the table plan, targets, values, classification and
 * desired-state checks read. A new type is one file here (its ResourceKind), its provider on the
 * agent (src/agent/providers/), its schema (src/schemas/resources/) and its words in
 * src/contract/vocabulary.ts; test/unit/resource-tables.test.ts fails while any of them is missing.
 */

type KindOf<T extends ResourceType> = ResourceKind<Extract<ResourceSpec, { type: T }>>;

export const RESOURCE_KINDS: { readonly [T in ResourceType]: KindOf<T> } = {
  release,
  file,
  flag,
  service,
  directory,
  package: packageKind,
  unit,
};

/** The kind of a spec, typed for it. */
export function kindOf<S extends ResourceSpec>(spec: S): ResourceKind<S> {
  return RESOURCE_KINDS[spec.type] as unknown as ResourceKind<S>;
}

/**
 * The fix for an artifact that is missing: build that type's artifact (a release's archive, a
 * package's .deb) into the fleet's artifacts/, or correct the path.
 */
export function missingArtifactFix(type: ResourceType): string {
  const artifact = RESOURCE_KINDS[type].artifact ?? { what: 'the artifact', build: 'the tool that makes it' };
  return `build ${artifact.what} into the fleet's artifacts/ (${artifact.build}), or correct the path`;
}

/** The fix for an artifact whose bytes are not the ones its sha256 names. */
export function artifactDigestFix(type: ResourceType): string {
  const what = RESOURCE_KINDS[type].artifact?.what ?? 'the artifact';
  return `write the sha256 of ${what} to install (sha256sum prints it), or point artifact at it`;
}

/** The type an action kind ("file.write", "file.delete") belongs to: the part before its dot; null for none of ours. */
export function typeOfAction(kind: string): ResourceType | null {
  const dot = kind.indexOf('.');
  const type = dot < 0 ? '' : kind.slice(0, dot);
  return Object.hasOwn(RESOURCE_KINDS, type) ? (type as ResourceType) : null;
}

/** The kind that plans (or declares destructive) an action kind; null for an action no type knows. */
export function kindOfAction(kind: string): ResourceKind | null {
  const type = typeOfAction(kind);
  return type === null ? null : RESOURCE_KINDS[type];
}

export type { ResourceKind } from './kind';
export { RELEASE_TARGET } from './release';
export { fileBytes } from './common';
export { debianVersionProblem, packageNameProblem } from './package';
export { ownFile, unitNameProblem, unitPropertyProblem } from './unit';
export * from './attributes';
