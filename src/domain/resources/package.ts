import type { BoundIntent, PackageSpec } from '../../contract/desired';
import { artifactLocation } from './release';
import { stringField, type ResourceKind, type WriteSpec } from './kind';

/*
 * package: a Debian package at an exact version, observed in dpkg's own database ({version,
 * status}, null when dpkg has none of its files installed). Installed from a .deb artifact (its
 * sha256 verified, like a release's) or from the host's apt sources. Removing a package is
 * destructive and never a repair. Its target is its name: the package is one thing on the host
 * whichever resource key declares it.
 */

/**
 * A Debian package name (policy 5.6.1): lower case letters, digits, "+", "-" and ".", at least two
 * characters, starting with a letter or a digit, so it can never read as an option ("-x") or a
 * path ("../x"). At most 128 characters, as agent.yaml's allow patterns.
 */
export const PACKAGE_NAME = /^[a-z0-9][a-z0-9+.-]{1,127}$/;

/** Why `name` is not a Debian package name, or null. */
export function packageNameProblem(name: string): string | null {
  if (PACKAGE_NAME.test(name)) return null;
  if (name.startsWith('-')) return 'starts with "-", so it would read as an option';
  if (name.includes('/')) return 'contains "/", and a package name is never a path';
  return 'is not a Debian package name (lower case letters, digits, "+", "-", ".", two or more, starting with a letter or a digit)';
}

const EPOCH = /^[1-9][0-9]{0,8}$/;
const UPSTREAM = /^[0-9][A-Za-z0-9.+~-]*$/;
const UPSTREAM_ALONE = /^[0-9][A-Za-z0-9.+~]*$/;
const REVISION = /^[A-Za-z0-9.+~]+$/;

/**
 * Why `version` is not a Debian version (policy 5.6.12: [epoch:]upstream_version[-debian_revision],
 * the upstream version starting with a digit), or null. Strict: dpkg itself accepts more with a
 * warning, and a desired version must be exactly the spelling dpkg reports (drift compares the two
 * as strings), so an epoch is a number other than 0 without leading zeros.
 */
export function debianVersionProblem(version: string): string | null {
  if (version.length === 0 || version.length > 128) return 'is empty or longer than 128 characters';
  const colon = version.indexOf(':');
  const epoch = colon < 0 ? null : version.slice(0, colon);
  const rest = colon < 0 ? version : version.slice(colon + 1);
  // dpkg reads the epoch as a number and reports "0:1.0-1" as "1.0-1" and "01:1.0" as "1:1.0":
  // only the spelling dpkg reports can ever be observed.
  if (epoch !== null && !EPOCH.test(epoch))
    return /^[0-9]+$/.test(epoch)
      ? `has the epoch "${epoch}:", which dpkg reports as ${Number(epoch) === 0 ? 'no epoch at all' : `"${Number(epoch)}:"`}: write the version as dpkg reports it`
      : 'has an epoch (before ":") that is not a whole number';
  const dash = rest.lastIndexOf('-');
  if (dash < 0)
    return UPSTREAM_ALONE.test(rest)
      ? null
      : 'must start with a digit and hold only letters, digits, ".", "+" and "~" (a "-" only before a Debian revision)';
  if (!UPSTREAM.test(rest.slice(0, dash)))
    return 'has an upstream version (before the last "-") that does not start with a digit or holds other characters than letters, digits, ".", "+", "~", "-"';
  return REVISION.test(rest.slice(dash + 1))
    ? null
    : 'has a Debian revision (after the last "-") that is empty or holds other characters than letters, digits, ".", "+", "~"';
}

/** A package's target: its name. */
export const packageTarget = (name: string) => `package:${name}`;

/** What the agent is sent to install: the name and version, and the .deb where the controller resolved it. */
function packageWrite(intent: BoundIntent, key: string, spec: PackageSpec): PackageSpec {
  return spec.artifact === undefined ? spec : { ...spec, artifact: artifactLocation(intent, key, { artifact: spec.artifact }) };
}

/** What an install puts on the host: that version, from that .deb where one is named (its digest), else from apt (null). */
const writtenOf = (spec: WriteSpec) => ({ version: stringField(spec, 'version'), sha256: stringField(spec, 'sha256') });

export const packageKind: ResourceKind<PackageSpec> = {
  // Before releases: what a release's service runs on is installed first.
  order: -1,
  actions: ['package.install'],
  artifact: { what: "the package's .deb", build: 'scripts/build-deb.mjs or dpkg-deb --build' },
  destructive: ['package.remove'],
  target: (_key, spec) => packageTarget(spec.name),
  targetOfAction: (_key, spec) => {
    const name = stringField(spec, 'name');
    return name === null ? null : packageTarget(name);
  },
  targetIsKey: false,
  targetIsPath: false,
  absenceIsFailure: false,
  targetNameProblem: (entry, rest) => {
    const problem = packageNameProblem(rest);
    return problem === null ? null : `"${entry}" names no package: "${rest}" ${problem}`;
  },
  desiredValue: (_key, spec) => ({ version: spec.version, status: 'installed' }),
  written: (_key, spec) => ({ version: spec.version, sha256: spec.sha256 ?? null }),
  writtenByAction: (_kind, spec) => writtenOf(spec),
  valueAfter: (_kind, spec) => ({ version: stringField(spec, 'version'), status: 'installed' }),
  plan: (a, spec, intent) => {
    const { type: _type, ...write } = packageWrite(intent, a.resource_key, spec);
    return { action: 'package.install', spec: write };
  },
  unsigned: ['artifact'],
  dependencies: () => [],
  references: () => [],
  forAgent: packageWrite,
};
