import { z } from 'zod';
import { WRITER_DEFAULTS, type Policy } from '../contract/desired';
import { withFix } from '../contract/fix';
import type { Provenance } from '../contract/observation';
import { MODES } from '../contract/vocabulary';
import { DURATION_HINT, formatDuration, parseDuration } from '../domain/duration';
import { namesTarget, targetNameProblem } from '../domain/targets';
import { LABEL_KEY, LABEL_VALUE } from '../domain/selector';
import { agentAllow, agentPackages, agentUnits } from './agent-reach';
import { agentServices } from './agent-services';
import { agentTrust } from './agent-trust';
import { exactly, nodeId, resourceKey } from './base';

export { RESOURCE_SCHEMAS, packageInstallSpec, releaseSpec, resourceSpec } from './resources';

/*
 * The two files a person writes, as zod schemas: desired/nodes/<node>.yaml (docs/architecture.md
 * §2) and agent.yaml. The resource specs, one file per type, are in resources/ and parse to
 * exactly the contract's types (src/contract/desired.ts). Messages a person will read are written "<what is wrong> — fix: <what to do>", so
 * problemsFromZod can always name the field, the problem and the fix; the readers that use these
 * are in documents.ts.
 */

const duration = (what: string, allowZero = false) =>
  z.string({ error: withFix(`${what} must be a duration string`, DURATION_HINT) }).superRefine((text, ctx) => {
    const ms = parseDuration(text);
    if (ms === null) ctx.addIssue({ code: 'custom', message: withFix(`"${text}" is not a duration`, DURATION_HINT) });
    else if (ms === 0 && !allowZero)
      ctx.addIssue({ code: 'custom', message: withFix(`${what} cannot be zero`, 'give a positive duration') });
  });

export const POLICY_DEFAULTS = {
  observation_ttl: '60s',
  retry_budget: 3,
  backoff: { initial: '5s', factor: 2, max: '5m' },
  resync_interval: '30s',
  node_timeout: '30s',
  conflict_window: '10m',
  watch: true,
} as const;

const retryBudget = z
  .number({ error: withFix('retry_budget must be a whole number', 'write how many repairs Datum may try, such as 3') })
  .int(withFix('retry_budget must be a whole number', 'write how many repairs Datum may try, such as 3'))
  .min(0, withFix('retry_budget cannot be negative', 'write 0 to never retry a repair, or a positive count such as 3'))
  .max(100, withFix('retry_budget above 100 hides oscillation', 'use a budget of at most 100'));

const writerRepairs = z
  .number({
    error: withFix('writer_repairs must be a whole number', 'write how many repairs of one target make a writer, such as 3'),
  })
  .int(withFix('writer_repairs must be a whole number', 'write how many repairs of one target make a writer, such as 3'))
  .min(0, withFix('writer_repairs cannot be negative', 'write 0 to turn the rule off, or a count such as 3'))
  .max(20, withFix('writer_repairs above 20 hides oscillation', 'use at most 20, or 0 to turn the rule off'));

export const policyInput = z
  .strictObject({
    observation_ttl: duration('observation_ttl').optional(),
    retry_budget: retryBudget.optional(),
    backoff: z
      .strictObject({
        initial: duration('backoff.initial').optional(),
        factor: z
          .number()
          .min(1, withFix('backoff.factor below 1 would shrink the delay', 'use a factor of 1 or more, such as 2'))
          .max(10)
          .optional(),
        max: duration('backoff.max').optional(),
      })
      .optional(),
    resync_interval: duration('resync_interval').optional(),
    node_timeout: duration('node_timeout').optional(),
    conflict_window: duration('conflict_window', true).optional(),
    writer_horizon: duration('writer_horizon')
      .describe(
        `How long Datum remembers each target's repairs (default ${WRITER_DEFAULTS.writer_horizon}): a target repaired writer_repairs times within it, that drifts again, is another writer's (CONFLICT, reason REPEATED_DRIFT), however much slower than conflict_window each change comes.`,
      )
      .optional(),
    writer_repairs: writerRepairs
      .describe(
        `How many repairs of one target within writer_horizon Datum makes before the target's next drift is CONFLICT (REPEATED_DRIFT) instead of new drift (default ${WRITER_DEFAULTS.writer_repairs}); 0 turns the rule off.`,
      )
      .optional(),
    watch: z
      .boolean({
        error: withFix(
          'watch must be true or false',
          'write watch: true (observe on change as well as every resync_interval) or watch: false (resync only)',
        ),
      })
      .optional(),
    repair_deadline: duration('repair_deadline')
      .describe(
        'How long one repair episode (from the first authorized repair until the node converges) may run; once it has passed, Datum stops repairing and the node is BLOCKED with REPAIR_DEADLINE_EXCEEDED. Unset: only retry_budget bounds an episode.',
      )
      .optional(),
  })
  .optional();

/** The policy with defaults applied and every duration in its one stored spelling. */
export function normalizePolicy(input: z.infer<typeof policyInput>): Policy {
  const d = (text: string | undefined, fallback: string) => formatDuration(parseDuration(text ?? fallback) ?? 0);
  return {
    observation_ttl: d(input?.observation_ttl, POLICY_DEFAULTS.observation_ttl),
    retry_budget: input?.retry_budget ?? POLICY_DEFAULTS.retry_budget,
    backoff: {
      initial: d(input?.backoff?.initial, POLICY_DEFAULTS.backoff.initial),
      factor: input?.backoff?.factor ?? POLICY_DEFAULTS.backoff.factor,
      max: d(input?.backoff?.max, POLICY_DEFAULTS.backoff.max),
    },
    resync_interval: d(input?.resync_interval, POLICY_DEFAULTS.resync_interval),
    node_timeout: d(input?.node_timeout, POLICY_DEFAULTS.node_timeout),
    conflict_window: d(input?.conflict_window, POLICY_DEFAULTS.conflict_window),
    watch: input?.watch ?? POLICY_DEFAULTS.watch,
    ...writtenOnly(input, d),
  };
}

/**
 * The policy fields added after release 0.1 (writer_horizon, writer_repairs, repair_deadline), only
 * where desired state writes them: a file that does not keeps the digest it had before they existed.
 */
function writtenOnly(
  input: z.infer<typeof policyInput>,
  d: (text: string | undefined, fallback: string) => string,
): Partial<Policy> {
  return {
    ...(input?.writer_horizon === undefined ? {} : { writer_horizon: d(input.writer_horizon, WRITER_DEFAULTS.writer_horizon) }),
    ...(input?.writer_repairs === undefined ? {} : { writer_repairs: input.writer_repairs }),
    ...(input?.repair_deadline === undefined ? {} : { repair_deadline: d(input.repair_deadline, '0s') }),
  };
}

/**
 * What a node is, for selectors (`--selector role=web`, a wave plan): outside the digest, so a
 * label changes no generation's content.
 */
export const nodeLabels = z.record(
  z
    .string()
    .regex(
      LABEL_KEY,
      withFix('a label key is letters and digits, with ".", "_", "-" or "/" inside', 'write role, zone or team.io/owner'),
    ),
  z
    .string({ error: withFix('a label value must be text', 'quote it: tier: "1"') })
    .regex(LABEL_VALUE, withFix('a label value is at most 63 letters, digits, ".", "_" or "-"', 'write zone: eu-west-1')),
  { error: withFix('labels must be a mapping of keys to values', 'write labels: { role: web, zone: a }') },
);

export const desiredStateFile = z.strictObject({
  node: nodeId,
  labels: nodeLabels.optional(),
  generation: z
    .number({
      error: withFix(
        'generation is missing or not a number',
        'add generation: <whole number>, raised by one for every change of intent',
      ),
    })
    .int(withFix('generation must be a whole number', 'write the generation as a whole number such as 12'))
    .min(1, withFix('generation must be 1 or more', 'start generations at 1 and raise them by one for every change')),
  resources: z.record(z.string(), z.unknown(), {
    error: withFix('resources must be a mapping of resource keys to resources', 'write resources: { <key>: { type: …, … } }'),
  }),
  policy: policyInput,
  expires: z.iso
    .datetime({
      offset: true,
      error: withFix('expires must be an ISO 8601 time', 'write expires: 2026-12-01T00:00:00Z, or remove it'),
    })
    .describe(
      'Until when this document may be acted on: past it, the loop is BLOCKED with STALE_INTENT and a host that verifies its signature refuses to act on it (ExpiredIntent), while observation goes on. Outside the digest: signing the same content again with a later expires is not a change of intent (datum sign, then datum refresh).',
    )
    .optional(),
});

export const provenance = exactly<Provenance>()(
  z.strictObject({
    approved_by: z
      .string({
        error: withFix(
          'an override needs approved_by',
          'record who approved the override (approved_by), why (reason) and since when (since)',
        ),
      })
      .min(1),
    reason: z
      .string({ error: withFix('an override needs a reason', 'record why the override exists, such as a change ticket') })
      .min(1),
    since: z.iso.datetime({
      offset: true,
      error: withFix('since must be an ISO 8601 time', 'write since: 2026-11-28T10:00:00Z'),
    }),
  }),
);

/**
 * An agent.yaml entry's name: a resource key ("config"), or a target ("file:etc/app/config.json",
 * "flag:maintenance", "release:current", "service:app") that protects what is written whatever key
 * claims it (docs/architecture.md §4 "Targets and operator decisions").
 */
export const agentEntryName = z.string().superRefine((name, ctx) => {
  if (namesTarget(name)) {
    const problem = targetNameProblem(name);
    if (problem)
      ctx.addIssue({
        code: 'custom',
        message: withFix(
          problem,
          'name a resource key, or a target as Datum names it: file:<path under the root>, flag:<name>, release:current, service:<key> or package:<name>',
        ),
      });
    return;
  }
  const key = resourceKey.safeParse(name);
  if (!key.success)
    ctx.addIssue({
      code: 'custom',
      message: withFix(
        `"${name}" is neither a resource key nor a target`,
        'start a key with a letter and use letters, digits, "_" or "-"; or name a target such as file:etc/app/config.json',
      ),
    });
});

/** agent.yaml's fields, before the checks between them (src/cli/schemas.ts extends it for the JSON Schema). */
export const agentConfigFields = z.strictObject({
  node: nodeId,
  root: z
    .string({
      error: withFix('root is missing', 'give the absolute directory this agent manages, such as /var/lib/datum/N-24'),
    })
    .refine(
      (r) => r.startsWith('/'),
      withFix('root must be an absolute path', 'give the absolute directory this agent manages, such as /var/lib/datum/N-24'),
    ),
  reconciliation: z
    .strictObject({
      mode: z
        .enum(MODES, {
          error: withFix('mode must be observe or enforce', 'write mode: observe (report only) or mode: enforce (repair)'),
        })
        .default('observe'),
      resources: z
        .record(
          agentEntryName,
          z.literal('observe', {
            error: withFix(
              'a per-resource mode can only be observe',
              'remove the entry to follow the host mode, or write observe',
            ),
          }),
        )
        .default({}),
    })
    .default({ mode: 'observe', resources: {} }),
  overrides: z
    .record(agentEntryName, provenance, {
      error: withFix(
        'overrides must be a mapping of resource keys to provenance',
        'write overrides: { <key>: { approved_by: …, reason: …, since: … } }',
      ),
    })
    .default({}),
  services: agentServices,
  allow: agentAllow,
  packages: agentPackages,
  units: agentUnits,
  trust: agentTrust,
});

/** agent.yaml, with the checks between its fields. */
export const agentConfig = agentConfigFields.superRefine((config, ctx) => {
  // What the host's package and service managers read must be out of desired state's reach: a
  // file resource could otherwise write dpkg's database or a unit file that systemd runs as root.
  const overlaps = (a: string, b: string) => {
    const [x, y] = [a.replace(/\/+$/, ''), b.replace(/\/+$/, '')];
    return x === y || y.startsWith(`${x}/`) || x.startsWith(`${y}/`);
  };
  const outside = (field: 'packages' | 'units', value: string | undefined, sub: string) => {
    if (value === undefined || (field === 'packages' && value === '/') || !overlaps(config.root, value)) return;
    ctx.addIssue({
      code: 'custom',
      path: [field, sub],
      message: withFix(
        `${field}.${sub} ${value} overlaps the node root ${config.root}, where desired state writes`,
        `give ${field}.${sub} a directory outside the node root`,
      ),
    });
  };
  outside('packages', config.packages.root, 'root');
  outside('units', config.units.directory, 'directory');
});
export type AgentConfig = z.infer<typeof agentConfig>;
