import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { z } from 'zod';
import {
  ACTIONS,
  DESTRUCTIVE_ACTIONS,
  InvalidAgentConfig,
  authorizedAction,
  canonicalJson,
  executionEvidence,
  formatDuration,
  observation,
  namesTarget,
  targetNameProblem,
  targetOfAction,
  parseDuration,
  type AgentConfig,
  type AuthorizedAction,
  type ExecutionEvidence,
  type Json,
  type Observation,
  type ObservedResource,
  type OperatorDecision,
  type RecordDecisionRequest,
  type ResourceSpec,
} from '../domain';
import { withFix, type AgentActivities, type ApplyRequest, type ObserveRequest, type RecordDecisionResult } from '../contract';
import { effectiveMode, loadAgentConfig } from './config';
import {
  UNKNOWN_SPEC,
  claimOnApply,
  endDecisionsFor,
  guardFor,
  observedProtections,
  protecting,
  recordDecisionAt,
  requestGuard,
  type ResolvedEntry,
} from './claims';
import { whileBeating } from './heartbeat';
import { AgentJournal, journalKey, withLock, type AcceptedGeneration } from './journal';
import { countedApply } from './metrics';
import { loggedApply, loggedDecision, loggedObserve } from './logging';
import { realRoot } from './paths';
import { assertJournalRoom } from './retention';
import { applyFileWrite, fileWriteSpec, observeFile } from './providers/file';
import { applyFlagWrite, flagWriteSpec, observeFlag, undeclaredFlags } from './providers/flag';
import { applyReleaseInstall, observeRelease, releaseInstallSpec } from './providers/release';
import { applyServiceRun, observeService, serviceRunSpec } from './providers/service';
import type { ApplyResult, AtWrite, NodeContext } from './providers/types';
import { AgentRefusal, toFailure } from './refusal';
import { watchNode } from './watch';

/*
 * The node agent's two activities (task queue datum-node-<node>). Both re-read agent.yaml on
 * every call: the mode and the overrides are the operator's, and a change takes effect on the
 * next observation or action without restarting the agent.
 */

export function createAgentActivities(configPath: string): AgentActivities {
  const config = path.resolve(configPath);
  return {
    observe: (request) => whileBeating(() => loggedObserve(request, () => observeNode(config, request))),
    apply: (request) => whileBeating(() => countedApply(request, () => loggedApply(request, () => applyAction(config, request)))),
    watch: (request) => watchNode(config, request),
    recordDecision: (request) => loggedDecision(request, () => recordDecision(config, request)),
  };
}

const now = () => new Date();

// ---------------------------------------------------------------------------------------------
// observe

export async function observeNode(configPath: string, request: ObserveRequest): Promise<Observation> {
  // observed_at is the oldest reading in the snapshot: taken before anything is read, so a slow
  // probe makes the snapshot older, never younger, and observation_ttl judges it honestly.
  const observedAt = now();
  let config: AgentConfig;
  try {
    config = await loadAgentConfig(configPath);
  } catch (err) {
    if (!(err instanceof InvalidAgentConfig)) throw err;
    return observation.parse({
      node_id: request.node,
      observed_at: observedAt.toISOString(),
      heartbeat_at: now().toISOString(),
      mode: 'observe',
      resources: {},
      config_error: err.message,
    });
  }
  assertNode(config, request.node, configPath, `observe of node "${request.node}"`);
  // Before anything is read: a write of an older generation that lands after this snapshot is
  // refused by the fence, so this generation never plans from a node an older loop still changes.
  const ctx: NodeContext = { node: config.node, root: await fenceOnObserve(config, request.generation, observedAt) };

  const keys = Object.keys(request.resources).sort();
  const seen = await Promise.all(keys.map((key) => observeResource(ctx, key, request.resources[key])));
  const resources: Record<string, ObservedResource> = {};
  keys.forEach((key, i) => (resources[key] = seen[i]));
  const undeclared = await undeclaredFlags(ctx, new Set(keys));
  // Protections by target: agent.yaml's entries reach the keys that claim their targets now.
  const guard = await guardFor(ctx.root, config, request.resources, request.generation ?? null, observedAt).catch(
    (err: unknown) => {
      if (!(err instanceof AgentRefusal)) throw err;
      return requestGuard(config, request.resources, observedAt);
    },
  );

  return observation.parse({
    node_id: config.node,
    observed_at: observedAt.toISOString(),
    heartbeat_at: now().toISOString(),
    mode: config.reconciliation.mode,
    ...observedProtections(guard, request.resources),
    resources,
    undeclared,
    config_error: null,
  });
}

/**
 * An observe of generation G moves the node's fence to G (never back): its loop has seen the
 * node, so an older loop's pass still in flight (planned before G was bound) writes nothing
 * after it, even when G has nothing to write. The root is created as an apply would create it,
 * or an older generation's first write could still create it afterwards. Observing stays
 * harmless: an observe of an older generation, or of none (a workflow from before this), moves
 * nothing and is still answered; and when .datum/ cannot be written safely (it leads out of the
 * root), the fence stays as it is, since every apply is refused for that same reason.
 */
async function fenceOnObserve(config: AgentConfig, generation: number | undefined, at: Date): Promise<string> {
  if (typeof generation !== 'number' || !Number.isSafeInteger(generation) || generation < 1)
    return await realRoot(config.root, false);
  const root = await realRoot(config.root, true);
  try {
    await new AgentJournal(root).advance(generation, 'observe', at);
  } catch (err) {
    if (!(err instanceof AgentRefusal)) throw err;
  }
  return root;
}

async function observeResource(ctx: NodeContext, key: string, spec: ResourceSpec): Promise<ObservedResource> {
  switch (spec.type) {
    case 'file':
      return await observeFile(ctx, spec);
    case 'flag':
      return await observeFlag(ctx, key);
    case 'release':
      return await observeRelease(ctx, spec);
    case 'service':
      return await observeService(ctx, key);
    default: {
      const type = (spec as { type?: unknown }).type;
      throw ApplicationFailure.nonRetryable(
        `observe of "${key}": unknown resource type ${JSON.stringify(type)}`,
        'InvalidAction',
        { resource_key: key },
      );
    }
  }
}

function assertNode(config: AgentConfig, node: string, configPath: string, subject: string): void {
  if (config.node === node) return;
  throw ApplicationFailure.nonRetryable(
    withFix(
      `${subject} refused: this agent serves node "${config.node}" (${configPath}), not "${node}"`,
      `route work for "${node}" to task queue datum-node-${node}, or correct node: in ${configPath}`,
    ),
    'NodeMismatch',
    { node, agent_node: config.node },
  );
}

// ---------------------------------------------------------------------------------------------
// recordDecision

/**
 * Keeps an operator decision per target on the node, so it outlives the workflow that made it
 * (docs/architecture.md §4 "Targets and operator decisions"). A malformed request changes nothing.
 */
export async function recordDecision(configPath: string, request: RecordDecisionRequest): Promise<RecordDecisionResult> {
  const subject = `recordDecision of ${JSON.stringify(request?.kind)} for "${request?.resource_key}" on node ${request?.node}`;
  let config: AgentConfig;
  try {
    config = await loadAgentConfig(configPath);
  } catch (err) {
    if (!(err instanceof InvalidAgentConfig)) throw err;
    throw toFailure(new AgentRefusal('InvalidAgentConfig', err.message), subject, {});
  }
  assertNode(config, request.node, configPath, subject);
  const parsed = recordDecisionRequest.safeParse(request);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(request)'}: ${i.message}`).join('; ');
    throw toFailure(
      new AgentRefusal('InvalidAction', withFix(`the request is malformed (${issues})`, 'send what decisionRequest() builds')),
      subject,
      {},
    );
  }
  const root = await realRoot(config.root, true);
  const decision = { ...parsed.data, node: request.node };
  try {
    // Fenced like an apply, inside the records' lock: a decision of a generation below the
    // node's fence would give back what a newer generation's write had ended.
    const holds = await recordDecisionAt(root, decision, () => admitDecision(root, config.node, decision));
    return { target: parsed.data.target, holds };
  } catch (err) {
    if (err instanceof AgentRefusal) throw toFailure(err, subject, { generation: decision.generation });
    throw err;
  }
}

/** Per-node fencing of a decision, as of an apply: refused below the fence, else its generation is accepted. */
async function admitDecision(root: string, node: string, request: RecordDecisionRequest): Promise<void> {
  const journal = new AgentJournal(root);
  const refusal = staleGeneration(request.generation, await journal.acceptedGeneration(), node);
  if (refusal) throw new AgentRefusal(refusal.type, withFix(refusal.problem, refusal.fix), refusal.facts);
  await journal.advance(request.generation, 'decision', now(), request.resource_key);
}

const recordDecisionRequest = z.object({
  node: z.string(),
  resource_key: z.string().min(1),
  target: z
    .string()
    .refine(
      (t) => namesTarget(t) && targetNameProblem(t) === null,
      'is not a target (file:<path>, flag:<name>, release:current, service:<key>)',
    ),
  kind: z.enum(['yield', 'conflict', 'retake']),
  spec_digest: z.string().min(1),
  generation: z.number().int().min(1),
  by: z.string().min(1),
  at: z.iso.datetime({ offset: true }),
  note: z.string().nullable(),
  sequence: z.array(z.object({ at: z.string(), value: z.json(), marker: z.string().nullable(), source: z.string() })).max(10),
});

// ---------------------------------------------------------------------------------------------
// apply

export async function applyAction(configPath: string, request: ApplyRequest): Promise<ExecutionEvidence> {
  // One apply at a time per agent: the fence check, the action and the fence update are one step.
  return await withLock(configPath, () => applyLocked(configPath, request));
}

type Refuse = (type: AgentRefusal['type'], problem: string, fix: string, facts?: Record<string, Json>) => ApplicationFailure;

async function applyLocked(configPath: string, request: ApplyRequest): Promise<ExecutionEvidence> {
  const raw = request.action as Partial<AuthorizedAction> | undefined;
  const kind = typeof raw?.action === 'string' ? raw.action : '(no action)';
  const key = typeof raw?.resource_key === 'string' ? raw.resource_key : '(no resource)';
  const what = `${kind} of "${key}" on node ${request.node}`;
  const context: Record<string, Json> = {
    node: request.node,
    resource_key: key,
    action: kind,
    idempotency_key: raw?.idempotency_key ?? null,
  };
  const refuse: Refuse = (type, problem, fix, facts = {}) =>
    toFailure(new AgentRefusal(type, withFix(problem, fix), facts), what, context);

  // 1. The operator's configuration, read now.
  const config = await configForApply(configPath, refuse);
  // 2. The right node, and a well-formed action.
  assertNode(config, request.node, configPath, what);
  const parsed = authorizedAction.safeParse(request.action);
  if (!parsed.success)
    throw refuse(
      'InvalidAction',
      `the action is malformed (${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')})`,
      're-plan from the desired state',
    );
  const action = parsed.data;
  // 3–5. What this host's operator allows: mode, ownership, decisions, never destroy, known
  // actions; judged by the target the action writes, whatever key it comes under.
  try {
    const scope = await targetScope(config, action);
    for (const check of ACTION_CHECKS) {
      const refusal = check(config, action, configPath, scope);
      if (refusal) throw refuse(refusal.type, refusal.problem, refusal.fix, refusal.facts);
    }
    const evidence = await fenceJournalAndAct(config, action, refuse);
    if (evidence.outcome === 'applied') await claimTarget(config, action, scope);
    return evidence;
  } catch (err) {
    // A provider, the fence or the journal found a path, an artifact or an obstruction it must
    // not touch: refused here, with the same subject as every other refusal.
    if (err instanceof AgentRefusal) throw toFailure(err, what, context);
    throw err;
  }
}

/** An agent that cannot read its own trust settings acts on nothing. */
async function configForApply(configPath: string, refuse: Refuse): Promise<AgentConfig> {
  try {
    return await loadAgentConfig(configPath);
  } catch (err) {
    if (!(err instanceof InvalidAgentConfig)) throw err;
    throw refuse(
      'InvalidAgentConfig',
      `agent.yaml is invalid, and an agent that cannot read its own trust settings acts on nothing:\n${err.message}`,
      `correct ${configPath}; the next action re-reads it`,
    );
  }
}

interface Refusal {
  type: AgentRefusal['type'];
  problem: string;
  fix: string;
  facts?: Record<string, Json>;
}

/** The target an action writes and what protects it (src/agent/claims.ts). */
interface TargetScope {
  target: string | null;
  /** agent.yaml entries that protect the action's key or its target. */
  entries: ResolvedEntry[];
  /** The operator decision (yield, open conflict) standing for the target, if any. */
  decision: OperatorDecision | null;
}

async function targetScope(config: AgentConfig, action: AuthorizedAction): Promise<TargetScope> {
  const target = targetOfAction(action.action, action.resource_key, action.spec);
  const root = await realRoot(config.root, false);
  const guard = await guardFor(root, config, {}, null, now());
  return {
    target,
    entries: protecting(guard, action.resource_key, target),
    decision: target === null ? null : (guard.decisions.targets[target] ?? null),
  };
}

/** After a write: the key claims the target, and a decision about another spec of it is over. */
async function claimTarget(config: AgentConfig, action: AuthorizedAction, scope: TargetScope): Promise<void> {
  if (scope.target === null) return;
  const root = await realRoot(config.root, true);
  await claimOnApply(root, action.resource_key, scope.target, action.desired_generation, now());
  await endDecisionsFor(root, scope.target, action.spec_digest);
}

const through = (e: ResolvedEntry) =>
  e.name === e.target || e.target === null ? e.entry : `${e.entry}, which protects ${e.target}`;

/** The agent's own refusals, in order, checked on every apply whatever the workflow decided. */
const ACTION_CHECKS: readonly ((
  config: AgentConfig,
  action: AuthorizedAction,
  configPath: string,
  scope: TargetScope,
) => Refusal | null)[] = [
  // 3. Mode: observe on the host, on this resource or on the target it writes means nothing is applied.
  (config, action, configPath, scope) => {
    const mode = effectiveMode(config, action.resource_key);
    const entry = scope.entries.find((e) => e.kind === 'observe');
    if (mode.mode !== 'observe' && !entry) return null;
    const because = mode.because ?? `${through(entry!)}: observe`;
    const fix = mode.because
      ? 'an operator on the node sets reconciliation.mode: enforce (and removes the per-resource observe) to let Datum repair it'
      : `an operator on the node removes ${entry!.entry} to let Datum repair ${scope.target ?? action.resource_key}`;
    return {
      type: 'ObserveModeRefusal',
      problem: `${because} in ${configPath}`,
      fix,
      facts: { mode: 'observe', target: scope.target },
    };
  },
  // 4. Operator-owned: never reverted, whatever key now claims the target.
  (_config, action, configPath, scope) => {
    const entry = scope.entries.find((e) => e.kind === 'override');
    const override = entry?.provenance;
    if (!entry || !override) return null;
    return {
      type: 'OperatorOwnedRefusal',
      problem: `${entry.name === action.resource_key ? `"${action.resource_key}"` : `"${action.resource_key}" writes ${scope.target}, which`} is operator-owned (${entry.name === action.resource_key ? '' : `${through(entry)}; `}override approved by ${override.approved_by} since ${override.since}: ${override.reason})`,
      fix: `the operator removes ${entry.entry} from ${configPath} when Datum may manage it again`,
      facts: { override, entry: entry.entry, target: scope.target },
    };
  },
  // 4b. An operator's yield, or an open conflict, about this very spec of the target: kept across generations.
  (_config, action, _configPath, scope) => {
    const d = scope.decision;
    if (!d || (action.spec_digest && d.spec_digest !== UNKNOWN_SPEC && d.spec_digest !== action.spec_digest)) return null;
    const facts = { target: d.target, decision: d.kind, by: d.by, at: d.at, spec_digest: d.spec_digest };
    const resolve = `datum resolve ${action.resource_key} on this node with --resolution retake`;
    return d.kind === 'yield'
      ? {
          type: 'OperatorOwnedRefusal',
          problem: `${d.target} was yielded to another writer by ${d.by} at ${d.at}${d.note ? ` (${d.note})` : ''}, for this same spec`,
          fix: `an operator retakes it (${resolve}), or desired state changes its spec`,
          facts,
        }
      : {
          type: 'ConflictOpenRefusal',
          problem: `a conflict with another writer is open on ${d.target} since ${d.at}, for this same spec`,
          fix: `an operator decides: ${resolve}, or yield to leave it to the other writer`,
          facts,
        };
  },
  // 5. Destructive or unknown action kinds.
  (_config, action) =>
    (DESTRUCTIVE_ACTIONS as readonly string[]).includes(action.action)
      ? {
          type: 'DestructiveActionRefusal',
          problem: `${action.action} is destructive and the agent never carries out destructive actions`,
          fix: 'an operator does this by hand if it is really wanted',
        }
      : null,
  (_config, action) =>
    (ACTIONS as readonly string[]).includes(action.action)
      ? null
      : {
          type: 'InvalidAction',
          problem: `"${action.action}" is not an action this agent knows (${ACTIONS.join(', ')})`,
          fix: 'upgrade the agent or the controller so both speak the same actions',
        },
];

async function fenceJournalAndAct(config: AgentConfig, action: AuthorizedAction, refuse: Refuse): Promise<ExecutionEvidence> {
  const ctx: NodeContext = { node: config.node, root: await realRoot(config.root, true), services: config.services };
  const journal = new AgentJournal(ctx.root);
  // 6. Per-node fencing: once generation G observed or acted on this node (any resource), nothing
  // older writes. Checked now, and again at the write itself (writeChecks).
  const stale = staleGeneration(action.desired_generation, await journal.acceptedGeneration(), config.node);
  if (stale) throw refuse(stale.type, stale.problem, stale.fix, stale.facts);
  // G is accepted once its action passes the fence, whatever the checks below decide: the agent
  // has seen newer intent, so an older generation's action queued behind this one never acts.
  await journal.accept(action, now());
  // 7. Idempotency: a recorded result is answered, not re-done. Before the checks below: our own
  // write moved the marker, and a retry of it is not a new write.
  const recorded = await journal.lookup(journalKey(action));
  if (recorded) return executionEvidence.parse({ ...recorded.evidence, outcome: 'replayed' });

  // 8–9. What the plan saw must still hold at the moment of the write: checked now, before any
  // work, and again with 6 at the write itself (atWrite).
  const { planHolds, atWrite } = writeChecks(ctx, action, journal, refuse);
  // An earlier attempt that wrote and died before journalling it moved the marker itself: when
  // its write is what is there now, it is recorded, not refused as another writer, nor redone.
  const landed = await landedEarlier(ctx, action, journal);
  if (landed) return await recordApplied(journal, action, landed);
  await planHolds();

  await journal.intend(action, now());
  let result: ApplyResult;
  try {
    result = await carryOut(ctx, action, atWrite);
  } catch (err) {
    // A refusal wrote nothing: no earlier attempt for a retry to find. Any other failure may have
    // written part way (a service spawned), so its record stays for the retry to judge.
    if (err instanceof AgentRefusal || err instanceof ApplicationFailure) await journal.unintend(action);
    throw err;
  }
  return await recordApplied(journal, action, result);
}

/**
 * 8–9 (`planHolds`), and 6, 8 and 9 again at the provider's irreversible step (`atWrite`). A fetch
 * or a stop may take minutes after the first checks, and meanwhile a newer generation may observe
 * the node (moving the fence) or another writer may move the marker. The re-check and the step
 * run under the fence's lock, so an observe of a newer generation either comes before the re-check
 * (the write is refused) or after the write (its snapshot shows it): never between the two.
 */
function writeChecks(
  ctx: NodeContext,
  action: AuthorizedAction,
  journal: AgentJournal,
  refuse: Refuse,
): { planHolds: () => Promise<void>; atWrite: AtWrite } {
  const planHolds = async () => {
    const refusal = staleSnapshot(action, now()) ?? (await markerMoved(ctx, action, journal));
    if (refusal) throw refuse(refusal.type, refusal.problem, refusal.fix, refusal.facts);
  };
  const mayWrite = async (accepted: AcceptedGeneration | null) => {
    const stale = staleGeneration(action.desired_generation, accepted, ctx.node);
    if (stale) throw refuse(stale.type, stale.problem, stale.fix, stale.facts);
    await planHolds();
  };
  return { planHolds, atWrite: (step) => journal.whileFenced(mayWrite, step) };
}

/** 6. The fence's refusal of a request (an apply, a decision) of `generation`, or null when it is not below it. */
function staleGeneration(generation: number, accepted: AcceptedGeneration | null, node: string): Refusal | null {
  if (accepted === null || generation >= accepted.generation) return null;
  const how = {
    apply: `first for "${accepted.resource_key}"`,
    observe: 'when its workflow observed the node',
    decision: `when its workflow recorded a decision on "${accepted.resource_key}"`,
  }[accepted.by];
  return {
    type: 'StaleGenerationRefusal',
    problem: `it is for generation ${generation}, but this agent already accepted generation ${accepted.generation} for node ${node} (${how})`,
    fix: `only the workflow of generation ${accepted.generation} or newer may change node ${node}; refresh the stale workflow's intent`,
    facts: { desired_generation: generation, accepted_generation: accepted.generation, accepted_by: accepted.by },
  };
}

async function recordApplied(journal: AgentJournal, action: AuthorizedAction, result: ApplyResult): Promise<ExecutionEvidence> {
  const executedAt = now();
  const evidence = executionEvidence.parse({
    resource_key: action.resource_key,
    action: action.action,
    idempotency_key: action.idempotency_key,
    outcome: 'applied',
    executed_at: executedAt.toISOString(),
    marker_after: result.marker_after,
    detail: result.detail,
    refusal: null,
  });
  await journal.record(action, evidence, executedAt);
  return evidence;
}

/**
 * The write of an earlier attempt of this very action (same journal key) that started and was
 * never journalled (the agent died in between), when the target now holds exactly what the
 * action writes under a marker other than the planned one; null otherwise.
 */
async function landedEarlier(ctx: NodeContext, action: AuthorizedAction, journal: AgentJournal): Promise<ApplyResult | null> {
  if (!(await journal.intended(action))) return null;
  const seen = await targetNow(ctx, action);
  if (seen.marker === action.observed_marker || !holdsWhatActionWrites(action, seen.value)) return null;
  return {
    marker_after: seen.marker,
    detail: `an earlier attempt of this action wrote it and ended before recording it: the target already holds what it writes (marker ${seen.marker ?? 'none'}), so it is recorded now and not done again.`,
  };
}

/** The observed value the action's write leaves (the provider's observe spelling). */
function holdsWhatActionWrites(action: AuthorizedAction, value: Json): boolean {
  const spec = action.spec as Record<string, Json> | null;
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) return false;
  switch (action.action) {
    case 'file.write':
      return value === spec.sha256;
    case 'flag.write':
      return canonicalJson(value) === canonicalJson(spec.value ?? null);
    case 'release.install':
      return canonicalJson(value) === canonicalJson({ version: spec.version ?? null, sha256: spec.sha256 ?? null });
    case 'service.start':
    case 'service.restart':
      return canonicalJson(value) === canonicalJson({ build: spec.build ?? null, config_sha256: spec.config_sha256 ?? null });
    default:
      return false;
  }
}

/** 8. A snapshot older than its observation_ttl never drives a write, however long the batch ran. */
function staleSnapshot(action: AuthorizedAction, at: Date): Refusal | null {
  const { observed_at: observedAt, observation_ttl: ttl } = action;
  const replan = 'nothing to do by hand: the loop takes a fresh snapshot and plans again';
  if (!observedAt || !ttl) {
    return {
      type: 'StaleSnapshotRefusal',
      problem: `it carries no ${observedAt ? 'observation_ttl' : 'observed_at'}, so the age of the snapshot it was planned from is unknown, and a snapshot of unknown age never drives a write`,
      fix: `upgrade the controller so its actions carry observed_at and observation_ttl; ${replan}`,
      facts: { observed_at: observedAt ?? null, observation_ttl: ttl ?? null },
    };
  }
  const ttlMs = parseDuration(ttl);
  const ageMs = at.getTime() - Date.parse(observedAt);
  if (ttlMs === null || Number.isNaN(ageMs)) {
    return {
      type: 'InvalidAction',
      problem: `its observed_at ${JSON.stringify(observedAt)} or observation_ttl ${JSON.stringify(ttl)} does not read as a time and a duration`,
      fix: 're-plan from the desired state (observed_at is ISO 8601, observation_ttl e.g. "60s")',
    };
  }
  if (ageMs <= ttlMs) return null;
  return {
    type: 'StaleSnapshotRefusal',
    problem: `the snapshot it was planned from (observed_at ${observedAt}) is ${formatDuration(Math.floor(ageMs / 1000) * 1000)} old at the moment of the write, past observation_ttl ${ttl}`,
    fix: replan,
    facts: { observed_at: observedAt, observation_ttl: ttl, age_ms: ageMs },
  };
}

/**
 * 9. Compare-and-swap on the action's own target (in the manner of Kubernetes resourceVersion):
 * its marker now must be the one the plan saw. Only the target's own marker counts, so a service
 * restart after its release switched `current` still goes ahead (the service's marker is its
 * process), while a file another writer changed after the snapshot is refused, not overwritten.
 */
async function markerMoved(ctx: NodeContext, action: AuthorizedAction, journal: AgentJournal): Promise<Refusal | null> {
  const current = await targetMarker(ctx, action);
  if (current === action.observed_marker) return null;
  // Moved by Datum's own write since the snapshot (another action or generation, say during a
  // hand-over, under this key or another that wrote the same target): the plan is out of date,
  // not contested. Re-observe and plan again; no conflict.
  const target = targetOfAction(action.action, action.resource_key, action.spec);
  const own = await journal.ownWrite(target, action.resource_key, current);
  if (own !== null) {
    const under = own.resource_key === action.resource_key ? '' : ` under the key "${own.resource_key}"`;
    return {
      type: 'StaleSnapshotRefusal',
      problem: `"${action.resource_key}" changed after the snapshot the plan was made from, by Datum's own write for generation ${own.generation}${under} at ${own.at} (marker ${current}, planned ${action.observed_marker ?? 'none'}), so the plan is out of date`,
      fix: 'nothing to do by hand: the loop takes a fresh snapshot and plans again',
      facts: {
        planned_marker: action.observed_marker,
        current_marker: current,
        written_by_generation: own.generation,
        written_by_key: own.resource_key,
      },
    };
  }
  return {
    type: 'MarkerMoved',
    problem: `MARKER_MOVED: "${action.resource_key}" changed after the snapshot the plan was made from (planned marker ${action.observed_marker ?? 'none'}, now ${current ?? 'none'}); another writer is at work, and writing now would lose its change`,
    fix: `Datum reports a conflicting writer; an operator decides with datum resolve ${ctx.node} --resource ${action.resource_key} --resolution retake|yield --by WHO`,
    facts: { planned_marker: action.observed_marker, current_marker: current, observed_at: action.observed_at ?? null },
  };
}

/** The target's marker as observe reports it: one spelling for the snapshot and the check. */
export async function targetMarker(ctx: NodeContext, action: AuthorizedAction): Promise<string | null> {
  return (await targetNow(ctx, action)).marker;
}

/** The action's target as observe reads it now. */
async function targetNow(ctx: NodeContext, action: AuthorizedAction): Promise<ObservedResource> {
  switch (action.action) {
    case 'file.write':
      return await observeFile(ctx, { path: specOf(action, fileWriteSpec).path });
    case 'flag.write':
      return await observeFlag(ctx, action.resource_key);
    case 'release.install':
      return await observeRelease(ctx, specOf(action, releaseInstallSpec));
    case 'service.start':
    case 'service.restart':
      return await observeService(ctx, action.resource_key);
    default:
      throw new AgentRefusal('InvalidAction', `${action.action} has no provider`);
  }
}

function specOf<T>(action: AuthorizedAction, schema: z.ZodType<T>): T {
  const r = schema.safeParse(action.spec);
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => `${i.path.map(String).join('.') || '(spec)'}: ${i.message}`).join('; ');
  throw new AgentRefusal('InvalidAction', withFix(`its spec is malformed (${issues})`, 're-plan from the desired state'));
}

async function carryOut(ctx: NodeContext, action: AuthorizedAction, atWrite: AtWrite): Promise<ApplyResult> {
  const spec = <T>(schema: z.ZodType<T>): T => specOf(action, schema);
  // Only new actions reach here (a replay is answered from the journal): room for its entry first.
  await assertJournalRoom(ctx.root, now());
  switch (action.action) {
    case 'file.write':
      return await applyFileWrite(ctx, action.resource_key, spec(fileWriteSpec), now, atWrite);
    case 'flag.write':
      return await applyFlagWrite(ctx, action.resource_key, spec(flagWriteSpec), now, atWrite);
    case 'release.install':
      return await applyReleaseInstall(ctx, action.resource_key, spec(releaseInstallSpec), atWrite);
    case 'service.start':
    case 'service.restart':
      return await applyServiceRun(ctx, action.resource_key, action.action, spec(serviceRunSpec), now, atWrite);
    default:
      throw new AgentRefusal('InvalidAction', `${action.action} has no provider`);
  }
}
