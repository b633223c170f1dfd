import { jsonEqual, sha256Hex, type Json } from '../canonical';
import type { Assessment } from '../assessment';
import type { ResourceSpec, ServiceSpec } from '../../contract/desired';
import { fileBytes } from './common';
import { fileContentDigest } from './file';
import type { ResourceKind } from './kind';

/*
 * service: a process on the current release, judged by what its own health endpoint reports it
 * loaded (the build and the config digest), never by being alive: a node whose process is alive
 * on 7.3 is not converged to 7.4.
 */

/** The config file's path a service is started with, when its config names a file resource. */
const configPath = (spec: ServiceSpec, resources: Record<string, ResourceSpec>): string | null => {
  const config = resources[spec.config];
  return config?.type === 'file' ? config.path : null;
};

export const service: ResourceKind<ServiceSpec> = {
  order: 3,
  actions: ['service.start', 'service.restart'],
  destructive: ['service.kill'],
  target: (key) => `service:${key}`,
  targetOfAction: (key) => `service:${key}`,
  targetIsKey: true,
  targetIsPath: false,
  absenceIsFailure: true,
  targetNameProblem: () => null,
  desiredValue: (_key, spec, resources) => {
    const release = resources[spec.release];
    const config = resources[spec.config];
    return {
      build: release?.type === 'release' ? release.version : null,
      config_sha256: config?.type === 'file' ? sha256Hex(fileBytes(config.content)) : null,
    };
  },
  // A service's write is the process it starts: its command, run on the config file at its path.
  // The build and the config bytes it loads are other targets' values (and where an operator owns
  // them, what is on disk), so they are not this one's.
  written: (_key, spec, resources) => ({ command: spec.command, config_path: configPath(spec, resources) }),
  writtenByAction: (_kind, spec) => ({ command: spec.command ?? null, config_path: spec.config_path ?? null }),
  valueAfter: (_kind, spec) => ({ build: spec.build ?? null, config_sha256: spec.config_sha256 ?? null }),
  plan: (a, spec, intent) => {
    // What the restarted process must report on its health endpoint (refine, below).
    const expect = a.desired as { build: Json; config_sha256: Json };
    return {
      action: a.observed?.value == null ? 'service.start' : 'service.restart',
      spec: {
        command: spec.command,
        build: expect.build,
        config_path: configPath(spec, intent.resources),
        config_sha256: expect.config_sha256,
      },
    };
  },
  unsigned: ['build', 'config_sha256'],
  dependencies: (spec) => [spec.release, spec.config],
  references: (spec) => [
    { field: 'release', key: spec.release, type: 'release' },
    { field: 'config', key: spec.config, type: 'file' },
  ],
  refine: withServiceInputs,
};

/**
 * A service should run what its node is meant to hold: the desired build and config where
 * Datum manages them, and what is actually on disk where an operator owns them ("managed
 * convergence is evaluated without" operator-owned state).
 */
function withServiceInputs(a: Assessment, spec: ServiceSpec, all: Assessment[]): Assessment {
  const input = (key: string, pick: (v: Json) => Json) => {
    const dep = all.find((d) => d.resource_key === key);
    if (!dep) return null;
    // By ownership only, never by mode: observe must plan exactly what enforce would.
    const source = dep.ownership === 'MANAGED' ? dep.desired : (dep.observed?.value ?? null);
    return source === null ? null : pick(source);
  };
  const desired: Json = {
    build: input(spec.release, (v) => (v && typeof v === 'object' && !Array.isArray(v) ? (v.version ?? null) : null)),
    config_sha256: input(spec.config, fileContentDigest),
  };
  const drift = a.ownership === 'UNKNOWN' && !a.observed ? false : !jsonEqual(a.observed?.value ?? null, desired);
  return { ...a, desired, drift };
}
