import type { ReleaseSpec } from '../../contract/desired';
import type { ResourceKind } from './kind';

/*
 * release: an artifact unpacked to releases/<version>, with the one `current` link pointing at it.
 * Its value is the record of the release `current` points at.
 */

/** The one link every release switches. */
export const RELEASE_TARGET = 'release:current';

export const release: ResourceKind<ReleaseSpec> = {
  order: 0,
  actions: ['release.install'],
  artifact: { what: "the release's archive", build: 'scripts/build-artifact.mjs' },
  destructive: ['release.delete'],
  target: () => RELEASE_TARGET,
  targetOfAction: () => RELEASE_TARGET,
  targetIsKey: false,
  targetIsPath: false,
  absenceIsFailure: false,
  targetNameProblem: (entry) =>
    entry === RELEASE_TARGET ? null : `"${entry}" is not a release target (the only one is ${RELEASE_TARGET})`,
  desiredValue: (_key, spec) => ({ version: spec.version, sha256: spec.sha256 }),
  written: (_key, spec) => ({ version: spec.version, sha256: spec.sha256 }),
  writtenByAction: (_kind, spec) => ({ version: spec.version ?? null, sha256: spec.sha256 ?? null }),
  valueAfter: (_kind, spec) => ({ version: spec.version ?? null, sha256: spec.sha256 ?? null }),
  plan: (a, spec, intent) => ({
    action: 'release.install',
    spec: { version: spec.version, artifact: artifactLocation(intent, a.resource_key, spec), sha256: spec.sha256 },
  }),
  unsigned: ['artifact'],
  dependencies: () => [],
  references: () => [],
  forAgent: (intent, key, spec) => ({ ...spec, artifact: artifactLocation(intent, key, spec) }),
};

/** Where the agent fetches a resource's artifact (a release's, a package's): the location the controller resolved, else as written. */
export function artifactLocation(
  intent: { locations?: Record<string, string> },
  key: string,
  spec: { artifact: string },
): string {
  return intent.locations?.[key] ?? spec.artifact;
}
