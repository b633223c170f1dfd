import { z } from 'zod';
import { withFix } from '../contract/fix';
import { REMOVABLE_TYPES } from '../contract/vocabulary';

/*
 * agent.yaml's reach outside the node's root: which packages and units desired state may manage
 * on this host (`allow`, nothing unless listed), and how the agent reaches the host's package
 * manager (`packages`) and service manager (`units`). Packages and units act outside the root:
 * dpkg writes into the system and runs maintainer scripts as root, and a unit runs commands. So a
 * desired-state author reaches no further than the host's operator wrote here, and no commit to
 * desired state can widen it (docs/configuration.md, "What the host allows").
 */

/** A Debian package name, or a pattern of them with * (any run of characters) and ? (one). */
const PACKAGE_PATTERN = /^[a-z0-9*?][a-z0-9+.*?-]{0,127}$/;
/** A unit name, or a pattern of them with * and ?, with its type suffix. */
const UNIT_PATTERN =
  /^[A-Za-z0-9:_*?\\][A-Za-z0-9:_.*?@\\-]{0,240}\.(service|socket|timer|path|target|mount|automount|swap|slice)$/;

export const PACKAGE_SOURCES = ['artifact', 'apt'] as const;
export type PackageSource = (typeof PACKAGE_SOURCES)[number];

const packagePattern = z
  .string()
  .regex(
    PACKAGE_PATTERN,
    withFix(
      'is not a package name or pattern',
      'write a Debian package name such as nginx, or a pattern such as "demo-*" (lower case, digits, "+", "-", ".", with * and ?)',
    ),
  );

const packageEntry = z.union(
  [
    packagePattern.transform((name) => ({ name, from: [...PACKAGE_SOURCES] })),
    z.strictObject({
      name: packagePattern,
      from: z
        .array(
          z.enum(PACKAGE_SOURCES, {
            error: withFix(
              'a package source is artifact or apt',
              'write from: [artifact] (only a .deb whose sha256 desired state names) or from: [artifact, apt] (also the host’s configured apt sources)',
            ),
          }),
        )
        .min(1, withFix('from is empty', 'list at least one source: artifact or apt'))
        .default([...PACKAGE_SOURCES]),
    }),
  ],
  {
    error: withFix(
      'an allowed package is a name or pattern, or { name, from }',
      'write "nginx", or { name: "demo-*", from: [artifact] }',
    ),
  },
);

const unitPattern = z
  .string()
  .regex(
    UNIT_PATTERN,
    withFix(
      'is not a unit name or pattern',
      'write a unit name with its type, such as nginx.service or "demo-*.service"; a template instance only with an @ in the pattern',
    ),
  );

const absolute = (what: string, example: string) =>
  z
    .string({ error: withFix(`${what} must be an absolute path`, `write it as ${example}`) })
    .refine(
      (p) => p.startsWith('/') && !p.split('/').includes('..'),
      withFix(`${what} must be an absolute path without ".."`, `write it as ${example}`),
    );

/**
 * A probe the host lets a unit's desired state run: an http URL, or a command's argv, each part a
 * pattern with * and ?. A probe runs even in observe mode and its outcome reaches the ledger, so
 * the host names each one: a command runs as the agent's user, and a URL is asked as often as the
 * node is observed.
 */
const probeEntry = z.union(
  [
    z
      .string()
      .regex(
        /^http:\/\/\S+$/,
        withFix('an allowed http probe is a URL', 'write it as http://127.0.0.1:8080/health (* and ? match any characters)'),
      ),
    z
      .array(z.string().min(1))
      .min(1)
      .refine(
        (argv) => argv[0].startsWith('/'),
        withFix('an allowed command probe names its program by absolute path', 'write ["/usr/bin/redis-cli", "ping"]'),
      ),
  ],
  {
    error: withFix(
      'an allowed probe is a URL or a command as a list',
      'write "http://127.0.0.1:8080/health" or ["/usr/bin/redis-cli", "ping"]',
    ),
  },
);

export const agentAllow = z
  .strictObject({
    packages: z
      .array(packageEntry, { error: withFix('allow.packages must be a list', 'write packages: ["nginx", "demo-*"]') })
      .default([]),
    units: z.array(unitPattern, { error: withFix('allow.units must be a list', 'write units: ["nginx.service"]') }).default([]),
    probes: z
      .array(probeEntry, {
        error: withFix(
          'allow.probes must be a list',
          'write probes: ["http://127.0.0.1:8080/health", ["/usr/bin/redis-cli", "ping"]]',
        ),
      })
      .default([]),
    // An approved planned removal of these types may run (docs/operations.md, "Removing
    // things"); anything else destructive stays refused whoever approves it.
    destructive: z
      .array(
        z.enum(REMOVABLE_TYPES, {
          error: withFix(
            'allow.destructive names resource types whose removal the agent carries out: file, flag',
            'write destructive: [file, flag], or leave it out (nothing is ever removed)',
          ),
        }),
        { error: withFix('allow.destructive must be a list', 'write destructive: [file, flag]') },
      )
      .default([]),
  })
  .default({ packages: [], units: [], probes: [], destructive: [] });

export const agentPackages = z
  .strictObject({
    root: absolute('packages.root', '/ (the system) or a directory of its own, such as /srv/datum/N-26.dpkg').default('/'),
    apt_config: absolute('packages.apt_config', '/etc/datum/apt.conf').optional(),
  })
  .default({ root: '/' });

export const agentUnits = z
  .strictObject({
    manager: z
      .enum(['system', 'user'], {
        error: withFix(
          'manager must be system or user',
          "write manager: system (the host's) or manager: user (the agent user's own)",
        ),
      })
      .default('system'),
    directory: absolute('units.directory', '/etc/systemd/system').optional(),
  })
  .default({ manager: 'system' });
