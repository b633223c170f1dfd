import { z } from 'zod';
import { DURATION_HINT, formatDuration, parseDuration } from './duration';
import { withFix } from '../contract/fix';
import { nodeId, resourceKey } from '../contract/identifiers';
import type { Json } from '../contract/json';
import type { DesiredProvenance, FileSpec, FlagSpec, Policy, ReleaseSpec, ResourceSpec, ServiceSpec } from '../contract/desired';
import type {
  AuthorizedAction,
  BackoffRecord,
  Condition,
  Decision,
  ExecutionEvidence,
  LedgerEntry,
  OperatorResolution,
  PlannedAction,
  RecheckTrigger,
  ResourceEntry,
} from '../contract/ledger';
import { LEDGER_VERSION } from '../contract/ledger';
import type {
  Observation,
  ObservedResource,
  OperatorDecision,
  Protection,
  Provenance,
  WriterEvidence,
} from '../contract/observation';
import {
  CONDITION_TYPES,
  EXECUTION_OUTCOMES,
  MODES,
  OPERATOR_DECISION_KINDS,
  OWNERSHIPS,
  REASONS,
  RECHECK_TRIGGERS,
  RESOLVERS,
  RESOURCE_TYPES,
  STATUSES,
} from '../contract/vocabulary';
import { hasParentSegment, pathSegments, pathSpellingProblem, type PathSpellingProblem } from './rootPath';
import { namesTarget, targetNameProblem } from './targets';
import { agentServices } from './agent-services';

/*
 * The wire and file formats of Datum, one zod schema each, with the field names of
 * docs/architecture.md (§2 desired state and agent.yaml, §3 the agent's wire types, §5 the ledger entry).
 * The types are the contract's (src/contract); each schema here validates exactly its type
 * (`exactly`), so a field added to one and not to the other does not compile.
 * Messages that a person will read are written as "<what is wrong> — fix: <what to do>", so the
 * error formatter (errors.ts) can always name the field, the problem and the fix. The primitive
 * identifiers (node names, resource keys) belong to the contract, which signals are built from.
 */

export { nodeId, resourceKey };

type Equals<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;

/**
 * `exactly<T>()(schema)`: the schema, when what it parses to is exactly T (no field more or less,
 * none optional on one side only); otherwise a compile error naming T.
 */
const exactly =
  <T>() =>
  <S extends z.ZodType<T>>(schema: S & (Equals<z.output<S>, T> extends true ? unknown : { 'parses to exactly': T })): S =>
    schema;

const VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,62}$/;
const SHA256_HEX = /^[a-f0-9]{64}$/;

/** Top-level names under a node root that belong to Datum itself and may not be written as files. */
export const RESERVED_ROOT_ENTRIES = ['.datum', 'releases', 'current', 'flags'];

/**
 * Why a path would not stay inside a node's root, or null when it does. Checked when desired
 * state is validated and again on the agent (which also resolves symlinks).
 */
export function nodePathProblem(path: string): string | null {
  const spelling = pathSpellingProblem(path);
  if (spelling) return NODE_PATH_PROBLEMS[spelling](path);
  const top = pathSegments(path)[0];
  if (top !== undefined && RESERVED_ROOT_ENTRIES.includes(top)) return `"${path}" is inside "${top}", which Datum manages itself`;
  return null;
}

const NODE_PATH_PROBLEMS: Record<PathSpellingProblem, (path: string) => string> = {
  absolute: (path) => `"${path}" is absolute and would leave the node root`,
  parent_segment: (path) => `"${path}" has a ".." segment and could leave the node root`,
  empty: () => 'is empty',
  nul: () => 'contains a NUL byte',
  empty_or_dot_segment: (path) => `"${path}" has an empty or "." segment`,
};

export const nodePath = z.string().superRefine((p, ctx) => {
  const problem = nodePathProblem(p);
  if (problem)
    ctx.addIssue({
      code: 'custom',
      message: withFix(problem, 'write a path relative to the node root, such as "etc/app/config.json"'),
    });
});

const duration = (what: string, allowZero = false) =>
  z.string({ error: withFix(`${what} must be a duration string`, DURATION_HINT) }).superRefine((text, ctx) => {
    const ms = parseDuration(text);
    if (ms === null) ctx.addIssue({ code: 'custom', message: withFix(`"${text}" is not a duration`, DURATION_HINT) });
    else if (ms === 0 && !allowZero)
      ctx.addIssue({ code: 'custom', message: withFix(`${what} cannot be zero`, 'give a positive duration') });
  });

const jsonValue: z.ZodType<Json> = z.lazy(() =>
  z.union([
    z.null(),
    z.boolean(),
    z.number().refine(Number.isFinite),
    z.string(),
    z.array(jsonValue),
    z.record(z.string(), jsonValue),
  ]),
);

const sha256Field = z
  .string({ error: withFix('the artifact digest is missing', 'add sha256: <hex sha256 of the archive> (sha256sum prints it)') })
  .regex(SHA256_HEX, withFix('is not a hex sha256', 'write the 64 lowercase hex digits that sha256sum prints for the archive'));

const artifactRef = z
  .string({
    error: withFix(
      'the artifact is missing',
      'name the release archive: a path under the fleet directory, an absolute path or an http(s) URL',
    ),
  })
  .superRefine((ref, ctx) => {
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(ref);
    if (scheme && !/^https?$/i.test(scheme[1] ?? '')) {
      ctx.addIssue({
        code: 'custom',
        message: withFix(`the artifact scheme "${scheme[1]}" is not supported`, 'use an http(s) URL or a file path'),
      });
    } else if (!scheme && hasParentSegment(ref)) {
      ctx.addIssue({
        code: 'custom',
        message: withFix(
          `"${ref}" has a ".." segment`,
          'reference artifacts under the fleet directory (artifacts/…), by absolute path or by URL',
        ),
      });
    }
  });

export const releaseSpec = exactly<ReleaseSpec>()(
  z.strictObject({
    type: z.literal('release'),
    version: z
      .string()
      .regex(VERSION, withFix('is not a usable release version', 'use letters, digits, ".", "_", "+" or "-", such as "7.4"')),
    artifact: artifactRef,
    sha256: sha256Field,
  }),
);
export const fileSpec = exactly<FileSpec>()(
  z.strictObject({
    type: z.literal('file'),
    path: nodePath,
    /**
     * The content is a secret: the ledger and the CLI show only its digest and size (as for every
     * file) and say so. Optional and never defaulted, so existing digests do not change.
     */
    sensitive: z.boolean().optional(),
    content: z.union([z.string(), z.record(z.string(), jsonValue), z.array(jsonValue)], {
      error: withFix(
        'content must be text or a JSON/YAML object',
        'write the file body as a string, or as a mapping that Datum writes as JSON',
      ),
    }),
  }),
);
export const serviceSpec = exactly<ServiceSpec>()(
  z.strictObject({
    type: z.literal('service'),
    release: resourceKey,
    config: resourceKey,
    command: z
      .array(z.string().min(1))
      .min(1, withFix('command is empty', 'give the program and its arguments, such as ["node", "server.js"]')),
  }),
);
export const flagSpec = exactly<FlagSpec>()(
  z.strictObject({
    type: z.literal('flag'),
    // null is how an absent flag is observed, so it cannot also be a desired value.
    value: jsonValue.refine(
      (v): boolean => v !== null,
      withFix('a flag value cannot be null', 'write false, 0, "" or another JSON value, or remove the resource'),
    ),
  }),
);

export const resourceSpec = exactly<ResourceSpec>()(z.discriminatedUnion('type', [releaseSpec, fileSpec, serviceSpec, flagSpec]));

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
    watch: z
      .boolean({
        error: withFix(
          'watch must be true or false',
          'write watch: true (observe on change as well as every resync_interval) or watch: false (resync only)',
        ),
      })
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
  };
}

export const desiredStateFile = z.strictObject({
  node: nodeId,
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
          'name a resource key, or a target as Datum names it: file:<path under the root>, flag:<name>, release:current or service:<key>',
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

export const agentConfig = z.strictObject({
  node: nodeId,
  root: z
    .string({ error: withFix('root is missing', 'give the absolute directory this agent manages, such as /var/lib/datum/N-24') })
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
});
export type AgentConfig = z.infer<typeof agentConfig>;

// ---------------------------------------------------------------------------------------------
// Observation: what the agent read from the node itself.

export const observedResource = exactly<ObservedResource>()(
  z.object({
    type: z.enum(RESOURCE_TYPES),
    /** The observed value in the same shape desiredValue() gives; null = absent / not running. */
    value: jsonValue,
    /** Change marker read from the thing itself (mtime+inode+size, symlink target+ctime, pid+start). */
    marker: z.string().nullable(),
    /** Set when the ordinary path cannot repair this resource without destroying something. */
    obstruction: z.string().nullable().default(null),
    detail: z.record(z.string(), jsonValue).default({}),
  }),
);

/**
 * An operator decision the agent keeps per target across generations: a yield, or an open
 * conflict, about the resource spec with this digest (docs/architecture.md §4 "Targets and
 * operator decisions").
 */
export const operatorDecision = exactly<OperatorDecision>()(
  z.object({
    /** The key that claimed the target when the decision was recorded. */
    resource_key: z.string(),
    target: z.string(),
    kind: z.enum(OPERATOR_DECISION_KINDS),
    spec_digest: z.string(),
    generation: z.number().int().nullable().default(null),
    by: z.string(),
    at: z.string(),
    note: z.string().nullable().default(null),
    /** A conflict's evidence of the other writer. */
    sequence: z
      .array(z.object({ at: z.string(), value: jsonValue, marker: z.string().nullable(), source: z.string() }))
      .default([]),
  }),
);

/**
 * An operator's resolveConflict as the ledger records it on the note that acknowledges it: the
 * yield the agent is told to keep, or the retake that ends the target's decision, for the key's
 * spec at the time. The ledger store's copy of the decisions follows it (src/activities/ledger-store/decisions.ts).
 */
export const operatorResolution = exactly<OperatorResolution>()(operatorDecision.extend({ kind: z.enum(['yield', 'retake']) }));

/** Which agent.yaml entry protects a key now, and through which target (null: by the key itself). */
export const protection = exactly<Protection>()(
  z.object({
    entry: z.string(),
    kind: z.enum(['override', 'observe']),
    target: z.string().nullable(),
  }),
);

export const observation = exactly<Observation>()(
  z.object({
    node_id: nodeId,
    observed_at: z.iso.datetime(),
    heartbeat_at: z.iso.datetime().nullable().default(null),
    mode: z.enum(MODES),
    resource_modes: z.record(z.string(), z.enum(MODES)).default({}),
    /** Local overrides; null provenance means an override was found without proof of who owns it. */
    overrides: z.record(z.string(), provenance.nullable()).default({}),
    resources: z.record(z.string(), observedResource),
    undeclared: z
      .array(
        z.object({ resource_key: z.string(), type: z.enum(RESOURCE_TYPES), value: jsonValue, marker: z.string().nullable() }),
      )
      .default([]),
    config_error: z.string().nullable().default(null),
    /** Per key: the agent.yaml entries that protect it (by its target or by name). Absent from older agents. */
    protections: z.record(z.string(), z.array(protection)).default({}),
    /** Per current key: the operator decision the agent holds for the target it claims. */
    decisions: z.record(z.string(), operatorDecision).default({}),
  }),
);
export type ObservationInput = z.input<typeof observation>;

// ---------------------------------------------------------------------------------------------
// Decisions, conditions and the ledger.

export const recheckTrigger = exactly<RecheckTrigger>()(
  z.object({
    trigger: z.enum(RECHECK_TRIGGERS),
    not_before: z.string().nullable().default(null),
    detail: z.string(),
  }),
);

export const condition = exactly<Condition>()(
  z.object({
    type: z.enum(CONDITION_TYPES),
    resource_key: z.string().nullable(),
    since: z.string(),
    message: z.string(),
    evidence: jsonValue,
    tried: z.array(z.string()),
    resolver: z.enum(RESOLVERS),
    needs_judgement: z.boolean(),
  }),
);

export const authorizedAction = exactly<AuthorizedAction>()(
  z.object({
    resource_key: z.string(),
    action: z.string(),
    desired_generation: z.number().int(),
    desired_digest: z.string(),
    idempotency_key: z.string(),
    /** The marker the plan was made against; with action_seq it tells a replay from a new attempt. */
    observed_marker: z.string().nullable(),
    action_seq: z.number().int(),
    spec: jsonValue,
    /**
     * When the snapshot the plan was made from was taken, and the TTL it was judged against: the
     * agent refuses the write once that snapshot is older than the TTL (StaleSnapshotRefusal).
     * Optional so ledger entries written before they existed stay valid; the agent refuses an
     * action without them, since a snapshot of unknown age never drives a write.
     */
    observed_at: z.string().nullable().optional(),
    observation_ttl: z.string().nullable().optional(),
    /**
     * The digest of the resource spec the action carries out (specDigest): the agent refuses it while
     * a yield or an open conflict stands for the same spec on its target. Optional: older entries lack it.
     */
    spec_digest: z.string().nullable().optional(),
  }),
);

export const executionEvidence = exactly<ExecutionEvidence>()(
  z.object({
    resource_key: z.string(),
    action: z.string(),
    idempotency_key: z.string(),
    /** skipped: not attempted, because an earlier action of the same batch failed or was refused. */
    outcome: z.enum(EXECUTION_OUTCOMES),
    executed_at: z.string(),
    /** The change marker our own write left; null when nothing was written. */
    marker_after: z.string().nullable(),
    detail: z.string(),
    refusal: z.string().nullable().default(null),
    /** The refusal's failure type (REFUSALS), so the judgement reads a type, not the sentence. Optional: older entries lack it. */
    refusal_type: z.string().nullable().optional(),
  }),
);

export const writerEvidence = exactly<WriterEvidence>()(
  z.object({ at: z.string(), value: jsonValue, marker: z.string().nullable(), source: z.string() }),
);

export const desiredProvenance = exactly<DesiredProvenance>()(
  z.object({
    source: z.string(),
    revision: z.string(),
    author: z.string().nullable().default(null),
    loaded_at: z.string(),
  }),
);

export const resourceEntry = exactly<ResourceEntry>()(
  z.object({
    resource_key: z.string(),
    type: z.enum(RESOURCE_TYPES).nullable(),
    ownership: z.enum(OWNERSHIPS),
    ownership_provenance: jsonValue,
    desired: jsonValue,
    observed: jsonValue,
    drift: z.boolean(),
    effective_mode: z.enum(MODES),
    idempotency_key: z.string().nullable(),
  }),
);

export const plannedAction = exactly<PlannedAction>()(
  authorizedAction.extend({
    destructive: z.boolean(),
    authorized: z.boolean(),
    /** Why a planned action is not authorized (observe mode, destructive, budget, …); null when it is. */
    withheld_because: z.string().nullable(),
  }),
);

export const backoffRecord = exactly<BackoffRecord>()(
  z.object({
    initial: z.string(),
    factor: z.number(),
    max: z.string(),
    next_delay: z.string().nullable(),
  }),
);

export const decision = exactly<Decision>()(
  z.object({
    node_id: z.string(),
    desired_generation: z.number().int(),
    desired_digest: z.string(),
    desired_provenance: desiredProvenance.nullable(),
    observed_at: z.string().nullable(),
    observation_ttl: z.string(),
    observation_fresh: z.boolean(),
    mode: z.enum(MODES).nullable(),
    resources: z.array(resourceEntry),
    operator_exceptions: z.array(
      z.object({ resource_key: z.string(), provenance: jsonValue, desired: jsonValue, observed: jsonValue }),
    ),
    planned_actions: z.array(plannedAction),
    authorized_actions: z.array(authorizedAction),
    execution_evidence: z.array(executionEvidence),
    attempt_count: z.number().int(),
    retry_budget: z.number().int(),
    backoff: backoffRecord,
    post_action_observation: jsonValue,
    conflicting_writer_evidence: z.array(z.object({ resource_key: z.string(), sequence: z.array(writerEvidence) })).nullable(),
    convergence_status: z.enum(STATUSES),
    reason: z.enum(REASONS),
    reason_detail: z.string(),
    recheck_trigger: recheckTrigger,
    conditions: z.array(condition),
    /**
     * The operator decisions (yields, open conflicts) this loop holds for the node's current keys:
     * the ledger store's durable copy of them. Optional: older entries lack it.
     */
    operator_decisions: z.array(operatorDecision).optional(),
    /** Decisions not carried because the key's spec changed since: new intent, a new episode. */
    new_intent: z.array(operatorDecision.extend({ spec_digest_now: z.string() })).optional(),
    /** On the note of a resolveConflict: what it told the agent to keep or end. Optional: older notes lack it. */
    operator_resolution: operatorResolution.optional(),
  }),
);

export const ledgerEntry = exactly<LedgerEntry>()(
  decision.extend({
    ledger_version: z.literal(LEDGER_VERSION),
    seq: z.number().int().min(1),
    decided_at: z.string(),
    workflow_id: z.string(),
  }),
);
