import { ApplicationFailure } from '@temporalio/common';
import { InvalidAgentConfig, REMOVABLE_TYPES, targetOf, type ObservedResource, type RemovableType } from '../../domain';
import {
  withFix,
  type RemovalPlanAnswer,
  type RemovalPlanRequest,
  type RemovalRequest,
  type RemovalResult,
  type RemovalTarget,
  type DecisionAuthor,
} from '../../contract';
import { forgetClaim, guardFor, protecting, type Guard, type TargetClaim } from '../node/claims';
import { AgentJournal, withLock } from '../node/journal';
import { REMOVALS_LOG, RemovalRecords, type ApprovalRecord } from '../node/removals';
import { identify, locateIn, readLocated, realRoot, removeIn } from '../fs';
import { ABSENT_MARKER } from '../markers';
import { loadAgentConfig, effectiveMode } from '../config';
import { inHeldParent, observeRegularFile } from '../providers/file';
import { observeGuarded, observed, type NodeContext } from '../providers/types';
import { AgentRefusal, toFailure } from '../refusal';
import { assertNode } from './assert-node';
import { decisionAuthor } from '../trust';
import type { Refusal } from './refusals';
import type { AgentConfig } from '../../schemas';

/*
 * Planned removals on the node (docs/operations.md, "Removing things"). A repair never destroys
 * (seed 004), and the agent's apply still refuses every destructive action whoever asks. Only
 * here, for a work item a person approved, does the agent remove anything, and only:
 *   - what Datum itself claimed on the node (.datum/claims.json), a file or a flag;
 *   - for a drop, what the newest generation the node accepted no longer declares;
 *   - where agent.yaml allows removing that type (allow.destructive: [file, flag], default none),
 *     the host or target is not in observe mode, and no operator protects the target;
 *   - the very bytes the approver saw (compare-and-swap on the plan's marker), kept in the
 *     backup area (.datum/backup/<target>.removed.<time>) and recorded in .datum/removals.jsonl;
 *   - once per approval: a second request of it is answered from the record.
 */

const now = () => new Date();

/** A target as Datum names it (file:<path>, flag:<name>): its type, and where it is under the root. */
function parseTarget(target: string): { type: RemovableType; rel: string; name: string } | { type: string; rel: null } {
  const colon = target.indexOf(':');
  const type = colon < 0 ? '' : target.slice(0, colon);
  const name = target.slice(colon + 1);
  if (type === 'file' && name !== '') return { type, rel: name, name };
  if (type === 'flag' && /^[A-Za-z][A-Za-z0-9_-]{0,62}$/.test(name)) return { type, rel: `flags/${name}.json`, name };
  return { type, rel: null };
}

const isRemovable = (type: string): type is RemovableType => (REMOVABLE_TYPES as readonly string[]).includes(type);

// ---------------------------------------------------------------------------------------------
// The plan: what Datum holds that no longer belongs to it, each target as it is now.

export async function planRemoval(configPath: string, request: RemovalPlanRequest): Promise<RemovalPlanAnswer> {
  const config = await configOf(configPath, 'plan a removal');
  assertNode(config, request.node, configPath, `removal plan of node "${request.node}"`);
  const root = await realRoot(config.root, false);
  const accepted = (await new AgentJournal(root).acceptedGeneration())?.generation ?? null;
  if (request.cause === 'dropped' && (accepted === null || request.generation === null || accepted < request.generation))
    // Retryable: the loop observes the generation soon, and the plan is made then.
    throw ApplicationFailure.retryable(
      `${request.node} has not observed generation ${request.generation} yet (its newest is ${accepted ?? 'none'}); the plan waits for it`,
      'NotObservedYet',
    );
  const guard = await guardFor(root, config, {}, null, now());
  const declared = await declaredTargets(root, request);
  const ctx: NodeContext = { node: config.node, root, config };
  const answer: RemovalPlanAnswer = { generation: accepted, targets: [], kept: [] };
  const claims = guard.claims.targets;
  for (const target of Object.keys(claims).sort()) {
    const claim = claims[target];
    if (!claim || declared.has(target)) continue;
    if (request.cause === 'dropped' && (claim.generation === null || claim.generation >= request.generation!)) continue;
    const planned = await planOne(ctx, config, guard, target, claim);
    if ('why' in planned) answer.kept.push({ target, why: planned.why });
    else answer.targets.push(planned);
  }
  return answer;
}

async function declaredTargets(root: string, request: RemovalPlanRequest): Promise<Set<string>> {
  const spelled = Object.entries(request.resources).map(([key, spec]) => targetOf(key, spec));
  const ident = await identify(root, spelled);
  return new Set(spelled.map(ident));
}

async function planOne(
  ctx: NodeContext,
  config: AgentConfig,
  guard: Guard,
  target: string,
  claim: TargetClaim,
): Promise<RemovalTarget | { why: string }> {
  const parsed = parseTarget(target);
  if (parsed.rel === null || !isRemovable(parsed.type))
    return { why: `Datum does not remove a ${parsed.type || 'target of this kind'}; remove it by hand if it must go` };
  const kept = protection(guard, target, claim.resource_key);
  if (kept) return { why: kept.problem };
  const seen = await readTarget(ctx, parsed.type, parsed.rel);
  if (seen.value === null && seen.obstruction === null) return { why: 'already absent' };
  if (seen.obstruction !== null || typeof seen.value !== 'string' || seen.marker === null)
    return { why: seen.obstruction ?? 'not a regular file Datum can keep a copy of' };
  const refusal = permission(config, parsed.type, claim.resource_key, guard, target);
  return {
    target,
    type: parsed.type,
    resource_key: claim.resource_key,
    claimed_generation: claim.generation,
    path: parsed.rel,
    size: typeof seen.detail.size === 'number' ? seen.detail.size : 0,
    sha256: seen.value,
    marker: seen.marker,
    refused: refusal ? withFix(refusal.problem, refusal.fix) : null,
  };
}

/** The regular file at `rel` as observe reads one, its value the sha256 of its bytes. */
async function readTarget(ctx: NodeContext, type: RemovableType, rel: string): Promise<ObservedResource> {
  const what = `${type} path`;
  return await observeGuarded(type, { path: rel }, async () => {
    try {
      const loc = await locateIn(ctx.root, rel, what, type === 'flag' ? 'flags' : null);
      const seen = await readLocated(ctx.root, loc, rel, what, (entry) =>
        observeRegularFile(type, entry, { path: rel }, (read) => ({ ok: true, value: read.sha256 })),
      );
      return seen ?? observed(type, null, ABSENT_MARKER, { path: rel, kind: 'absent' });
    } catch (err) {
      if (err instanceof AgentRefusal) return observed(type, null, null, { path: rel, refusal: err.type }, err.message);
      throw err;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// What keeps a target: an operator's protection (never removed by this path at all), or
// agent.yaml not allowing it now (removed once it does).

function protection(guard: Guard, target: string, key: string): Refusal | null {
  const entry = protecting(guard, key, target).find((e) => e.kind === 'override');
  if (entry)
    return {
      type: 'OperatorOwnedRefusal',
      problem: `${target} is protected by ${entry.entry} in agent.yaml`,
      fix: `the operator removes ${entry.entry} if Datum may remove it`,
    };
  const decision = guard.decisions.targets[target];
  if (decision)
    return {
      type: decision.kind === 'yield' ? 'OperatorOwnedRefusal' : 'ConflictOpenRefusal',
      problem:
        decision.kind === 'yield'
          ? `${target} was yielded to another writer by ${decision.by} at ${decision.at}`
          : `a conflict with another writer is open on ${target} since ${decision.at}`,
      fix: 'an operator retakes it first (datum resolve … --resolution retake) if Datum may remove it',
    };
  return null;
}

function permission(config: AgentConfig, type: RemovableType, key: string, guard: Guard, target: string): Refusal | null {
  if (!config.allow.destructive.includes(type))
    return {
      type: 'DestructiveActionRefusal',
      problem: `agent.yaml on ${config.node} does not allow removing a ${type} (allow.destructive lists ${config.allow.destructive.join(', ') || 'nothing'})`,
      fix: `an operator on the node adds ${type} to allow.destructive in its agent.yaml, then approves again`,
    };
  const mode = effectiveMode(config, key);
  const observeEntry = protecting(guard, key, target).find((e) => e.kind === 'observe');
  if (mode.mode === 'observe' || observeEntry)
    return {
      type: 'ObserveModeRefusal',
      problem: `${mode.because ?? `${observeEntry!.entry}: observe`}, and a removal is a write`,
      fix: 'an operator on the node sets enforce for it, then approves again',
    };
  return null;
}

// ---------------------------------------------------------------------------------------------
// An approval: every check first (a refusal removes nothing), then exactly the targets named.

/**
 * The host's consent to an approval beyond agent.yaml's allow.destructive: on a host that requires
 * signatures, an operator key trust.operators lists signed the statement of exactly this approval
 * (this node, this item, these targets with these bytes, this approver, not expired). Who approved,
 * proven or declared; or why the host refuses it.
 */
export function operatorConsent(config: AgentConfig, request: RemovalRequest): { author: DecisionAuthor } | { refusal: Refusal } {
  const wanted = {
    node: config.node,
    decision: 'approve' as const,
    subject: request.item,
    targets: (Array.isArray(request.targets) ? request.targets : []).map((t) => ({ target: t.target, sha256: t.sha256 })),
    by: request.approval?.by,
  };
  return decisionAuthor(config, wanted, request.approval?.operator, request.approval?.identity ?? null, now());
}

export async function removeTargets(configPath: string, request: RemovalRequest): Promise<RemovalResult> {
  const subject = `removal ${request.item} on node "${request.node}"`;
  // One at a time with every apply of this agent: nothing writes a target between its check and its removal.
  return await withLock(configPath, async () => {
    const config = await configOf(configPath, subject);
    assertNode(config, request.node, configPath, subject);
    const root = await realRoot(config.root, false);
    const records = new RemovalRecords(root);
    const prior = await records.lookup(request.key);
    if (prior?.done) return resultOf(prior, true);
    try {
      const author = await checkAll(config, root, request, prior);
      const progress = prior ?? { key: request.key, removed: [], done: null };
      return { ...(await removeAll(config, root, request, records, progress, author)), author };
    } catch (err) {
      if (err instanceof AgentRefusal) throw toFailure(err, subject, { node: request.node, item: request.item });
      throw err;
    }
  });
}

const resultOf = (r: ApprovalRecord, replayed: boolean): RemovalResult => ({
  key: r.key,
  at: r.done?.at ?? now().toISOString(),
  replayed,
  removed: r.removed,
  record: REMOVALS_LOG,
});

async function checkAll(
  config: AgentConfig,
  root: string,
  request: RemovalRequest,
  prior: ApprovalRecord | null,
): Promise<DecisionAuthor> {
  const consent = operatorConsent(config, request);
  if ('refusal' in consent) {
    const { type, problem, fix, facts } = consent.refusal;
    throw new AgentRefusal(type, withFix(problem, fix), facts);
  }
  if (!Array.isArray(request.targets) || request.targets.length === 0)
    throw new AgentRefusal('InvalidAction', withFix('the approval names no target', 'approve a plan that lists what to remove'));
  const guard = await guardFor(root, config, {}, null, now());
  const claims = guard.claims;
  const accepted = (await new AgentJournal(root).acceptedGeneration())?.generation ?? null;
  const done = new Set(prior?.removed.map((r) => r.target) ?? []);
  for (const t of request.targets) {
    if (done.has(t.target)) continue;
    const refusal = targetRefusal(config, guard, claims.targets[t.target] ?? null, t.target, request.cause, accepted);
    if (refusal) throw new AgentRefusal(refusal.type, withFix(refusal.problem, refusal.fix), { target: t.target });
  }
  return consent.author;
}

function targetRefusal(
  config: AgentConfig,
  guard: Guard,
  claim: TargetClaim | null,
  target: string,
  cause: RemovalRequest['cause'],
  accepted: number | null,
): Refusal | null {
  const parsed = parseTarget(target);
  if (parsed.rel === null || !isRemovable(parsed.type))
    return {
      type: 'DestructiveActionRefusal',
      problem: `${target} is not a file or a flag, and the agent removes nothing else`,
      fix: 'remove it by hand if it must go',
    };
  if (!claim)
    return {
      type: 'DestructiveActionRefusal',
      problem: `Datum never claimed ${target} on this node (.datum/claims.json), and it removes only what it managed`,
      fix: 'remove it by hand if it must go',
    };
  if (cause === 'dropped' && (claim.generation === null || accepted === null || claim.generation >= accepted))
    return {
      type: 'DestructiveActionRefusal',
      problem: `${target} is declared by generation ${claim.generation ?? '(unknown)'}, the newest this node accepted (${accepted ?? 'none'}): it is not dropped`,
      fix: 'plan the removal again once a newer generation no longer declares it',
    };
  return protection(guard, target, claim.resource_key) ?? permission(config, parsed.type, claim.resource_key, guard, target);
}

async function removeAll(
  config: AgentConfig,
  root: string,
  request: RemovalRequest,
  records: RemovalRecords,
  progress: ApprovalRecord,
  author: DecisionAuthor,
): Promise<RemovalResult> {
  const ctx: NodeContext = { node: config.node, root, config };
  for (const t of request.targets) {
    if (progress.removed.some((r) => r.target === t.target)) continue;
    const parsed = parseTarget(t.target) as { type: RemovableType; rel: string };
    const gone = await inHeldParent(ctx, parsed.type, parsed.rel, false, (dir, name, target) =>
      removeIn(root, dir, name, { type: parsed.type, rel: parsed.rel, target }, { marker: t.marker, sha256: t.sha256 }, now),
    );
    const item = {
      target: t.target,
      path: parsed.rel,
      size: gone.size,
      sha256: gone.sha256,
      backup: `.datum/backup/${gone.backup}`,
    };
    progress = { ...progress, removed: [...progress.removed, item] };
    const { by, identity, note } = request.approval;
    const line = {
      at: now().toISOString(),
      node: config.node,
      item: request.item,
      key: request.key,
      by,
      identity,
      note,
      author,
      ...item,
    };
    await records.removed(line, progress);
    await forgetClaim(root, t.target);
  }
  progress = { ...progress, done: { at: now().toISOString() } };
  await records.save(progress);
  return resultOf(progress, false);
}

async function configOf(configPath: string, subject: string): Promise<AgentConfig> {
  try {
    return await loadAgentConfig(configPath);
  } catch (err) {
    if (!(err instanceof InvalidAgentConfig)) throw err;
    throw ApplicationFailure.nonRetryable(
      withFix(`${subject} refused: agent.yaml is invalid:\n${err.message}`, `correct ${configPath}`),
      'InvalidAgentConfig',
    );
  }
}
