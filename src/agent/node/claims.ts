/*
 * Over 450 lines, left whole for now: its seams are the claims a loop records (yield,
 * conflict, retake with an operator's author) and the reads that judge a write against them;
 * cutting them apart is a change of its own, after this round's operator signatures settled here.
 */
import { RESOURCE_KINDS, typeOfAction } from '../../domain/resources';
import {
  namesTarget,
  sameIntent,
  type IntentDigests,
  targetOf,
  type Observation,
  type OperatorDecision,
  type Protection,
  type Provenance,
  type RecordDecisionRequest,
  type ResourceSpec,
  type ResourceType,
} from '../../domain';
import { isDirectory, readJsonAt, writeJsonAt, asSpelled, identify, type Identify, inDatumDir } from '../fs';
import { withLock } from './lock';
import { type AgentConfig, operatorDecision } from '../../schemas';

/*
 * What the agent remembers about targets, per node, under <root>/.datum/ (docs/architecture.md §4
 * "Targets and operator decisions"):
 *   claims.json     which resource key claims which target, from which generation; and the
 *                   target each key-based agent.yaml entry was bound to when first seen
 *   decisions.json  the operator decisions (yield, open conflict) kept per target
 * Protections and refusals are judged by target, so renaming a resource escapes none of them,
 * and a file target by its identity (src/agent/fs/identity.ts: where the write lands), so spelling
 * its path through a symlinked directory escapes none of them either.
 */

export interface TargetClaim {
  resource_key: string;
  generation: number | null;
  since: string;
}

export interface ClaimsFile {
  targets: Record<string, TargetClaim>;
  /** The target each key claimed last. */
  keys: Record<string, { target: string; generation: number | null }>;
  /** Key-based agent.yaml entries ("overrides.config") and the target each was bound to. */
  bindings: Record<string, { target: string; bound_at: string }>;
}

export interface DecisionsFile {
  targets: Record<string, OperatorDecision>;
}

/** One agent.yaml entry that protects something: by a resource key or by a target. */
export interface ResolvedEntry {
  /** Where it is in agent.yaml: "overrides.config", "reconciliation.resources.file:etc/app.json". */
  entry: string;
  kind: Protection['kind'];
  /** The key or target it is written under. */
  name: string;
  /** The target it protects; null when nothing has claimed the key yet. */
  target: string | null;
  provenance: Provenance | null;
}

/** What protects the node's resources now, and the records to keep: every target by its identity. */
export interface Guard {
  entries: ResolvedEntry[];
  claims: ClaimsFile;
  decisions: DecisionsFile;
  /** The identity of a target (of the request's resources and of every record) on this root now; absent: as spelled. */
  identify?: Identify;
}

/** The spec digest of a damaged decision record: it matches every spec, so it still protects its target. */
export const UNKNOWN_SPEC = 'unknown';

const emptyClaims = (): ClaimsFile => ({ targets: {}, keys: {}, bindings: {} });

/**
 * Records the request's claims (a claim from an older generation than the target's recorded one
 * does not replace it), binds agent.yaml's key-based entries to targets, and persists both when
 * they changed. Serialised per root with every other writer of these records.
 */
export async function guardFor(
  root: string,
  config: AgentConfig,
  resources: Record<string, ResourceSpec>,
  generation: number | null,
  at: Date,
): Promise<Guard> {
  return await withLock(`records:${root}`, async () => {
    const stored = await readClaims(root);
    const held = await readDecisions(root);
    const ident = await identify(root, spelledTargets(config, stored, held, resources));
    const before = claimsAs(stored, ident);
    const claimed = claimResources(before, resources, generation, at.toISOString(), ident);
    const { entries, bindings } = resolveEntries(config, claimed, resources, at.toISOString(), ident);
    const claims = { ...claimed, bindings };
    if (JSON.stringify(claims) !== JSON.stringify(stored) && (await rootExists(root)))
      await writeRecord(root, 'claims.json', claims);
    return { entries, claims, decisions: decisionsAs(held, ident), identify: ident };
  });
}

/**
 * The guard from agent.yaml and the request alone, for an observe whose records cannot be read
 * safely (.datum/ leads out of the root): every apply is refused for the same reason, so the
 * snapshot still reports the node instead of failing.
 */
export function requestGuard(config: AgentConfig, resources: Record<string, ResourceSpec>, at: Date): Guard {
  const claims = emptyClaims();
  return {
    entries: resolveEntries(config, claims, resources, at.toISOString()).entries,
    claims,
    decisions: { targets: {} },
    identify: asSpelled,
  };
}

/** Every target spelled in agent.yaml, the records and the request: what `identify` resolves. */
function spelledTargets(
  config: AgentConfig,
  claims: ClaimsFile,
  decisions: DecisionsFile,
  resources: Record<string, ResourceSpec>,
): string[] {
  return [
    ...Object.entries(resources).map(([key, spec]) => targetOf(key, spec)),
    ...[...Object.keys(config.overrides), ...Object.keys(config.reconciliation.resources)].filter(namesTarget),
    ...Object.keys(claims.targets),
    ...Object.values(claims.keys).map((k) => k.target),
    ...Object.values(claims.bindings).map((b) => b.target),
    ...Object.keys(decisions.targets),
  ];
}

/**
 * The claims with every target by its identity. Two spellings of one target keep the claim of
 * the newer generation (as a claim does): recorded before identities were, or made by a symlink
 * created since.
 */
export function claimsAs(file: ClaimsFile, ident: Identify): ClaimsFile {
  const targets: ClaimsFile['targets'] = {};
  for (const [spelled, claim] of Object.entries(file.targets)) {
    const target = ident(spelled);
    const prior = targets[target];
    if (!prior || (claim.generation ?? 0) > (prior.generation ?? 0)) targets[target] = claim;
  }
  const keys: ClaimsFile['keys'] = {};
  for (const [key, k] of Object.entries(file.keys)) keys[key] = { ...k, target: ident(k.target) };
  const bindings: ClaimsFile['bindings'] = {};
  for (const [entry, b] of Object.entries(file.bindings)) bindings[entry] = { ...b, target: ident(b.target) };
  return { targets, keys, bindings };
}

/**
 * The decisions with every target by its identity. Two spellings of one target keep a yield over
 * a conflict (the operator's decision outranks Datum's finding), else the later one.
 */
export function decisionsAs(file: DecisionsFile, ident: Identify): DecisionsFile {
  const targets: DecisionsFile['targets'] = {};
  for (const [spelled, d] of Object.entries(file.targets)) {
    const target = ident(spelled);
    const prior = targets[target];
    const yields = (x: OperatorDecision) => x.kind === 'yield';
    if (!prior || (yields(d) && !yields(prior)) || (yields(d) === yields(prior) && d.at > prior.at))
      targets[target] = { ...d, target };
  }
  return { targets };
}

/** The claims after `resources` claimed their targets (pure). */
export function claimResources(
  file: ClaimsFile,
  resources: Record<string, ResourceSpec>,
  generation: number | null,
  at: string,
  ident: Identify = asSpelled,
): ClaimsFile {
  const targets = { ...file.targets };
  const keys = { ...file.keys };
  for (const key of Object.keys(resources).sort()) {
    const spec = resources[key];
    if (!spec) continue;
    const target = ident(targetOf(key, spec));
    const prior = targets[target];
    const older = prior && prior.generation !== null && generation !== null && generation < prior.generation;
    if (older) continue;
    if (!prior || prior.resource_key !== key || prior.generation !== generation)
      targets[target] = { resource_key: key, generation, since: prior?.resource_key === key ? prior.since : at };
    keys[key] = { target, generation };
  }
  return { ...file, targets, keys };
}

/**
 * Each agent.yaml entry with the target it protects. An entry named after a target protects it;
 * one named after a key keeps the target it was first bound to, else the target the key claimed
 * last, else the one it claims in this request. Bindings of entries no longer in agent.yaml go.
 */
export function resolveEntries(
  config: AgentConfig,
  claims: ClaimsFile,
  resources: Record<string, ResourceSpec>,
  at: string,
  ident: Identify = asSpelled,
): { entries: ResolvedEntry[]; bindings: ClaimsFile['bindings'] } {
  const listed: Omit<ResolvedEntry, 'target'>[] = [
    ...Object.entries(config.overrides).map(([name, provenance]) => ({
      entry: `overrides.${name}`,
      kind: 'override' as const,
      name,
      provenance,
    })),
    ...Object.keys(config.reconciliation.resources).map((name) => ({
      entry: `reconciliation.resources.${name}`,
      kind: 'observe' as const,
      name,
      provenance: null,
    })),
  ];
  const bindings: ClaimsFile['bindings'] = {};
  const entries = listed.map((e): ResolvedEntry => {
    if (namesTarget(e.name)) return { ...e, target: ident(e.name) };
    const spec = resources[e.name];
    const spelled = claims.bindings[e.entry]?.target ?? claims.keys[e.name]?.target ?? (spec ? targetOf(e.name, spec) : null);
    const target = spelled === null ? null : ident(spelled);
    if (target !== null) bindings[e.entry] = { target, bound_at: claims.bindings[e.entry]?.bound_at ?? at };
    return { ...e, target };
  });
  return { entries, bindings };
}

/**
 * Key-based entries whose target cannot be established: the key is in no resource of the request,
 * claimed nothing the records know, and has no binding. The records were lost (.datum/ removed, or
 * restored from before the binding) or the key was never seen. Such an entry may protect any file,
 * or the release, now written under a renamed key, so the agent fails closed: while one stands it
 * writes no file and switches no release (a flag or a service is its key's own target, so a renamed
 * one is another thing, and goes on).
 */
export function unboundEntries(guard: Pick<Guard, 'entries'>): ResolvedEntry[] {
  return guard.entries.filter((e) => e.target === null && !namesTarget(e.name));
}

/**
 * Whether a resource type, or an action ("file.write"), is held back by an unbound entry: every type
 * whose target comes from its spec (a path, a package name), not from its key (a flag, a service),
 * since a renamed key writes the same target. An action of no known type is not: the agent refuses
 * it for what it is (an unknown action).
 */
export function heldBackByUnbound(typeOrAction: string): boolean {
  const type = typeOrAction.includes('.') ? typeOfAction(typeOrAction) : typeOrAction;
  return type !== null && Object.hasOwn(RESOURCE_KINDS, type) && !RESOURCE_KINDS[type as ResourceType].targetIsKey;
}

/** Why unbound entries hold back every type whose target is not its key (files, the release, packages, …), and how the operator ends it. */
export function unboundProblem(entries: ResolvedEntry[]): { problem: string; fix: string } {
  const names = entries.map((e) => e.entry).join(', ');
  const keys = entries.map((e) => `"${e.name}"`).join(' or ');
  const spell = [
    ...(entries.some((e) => e.kind === 'override') ? ['overrides: {"file:<path>": …}'] : []),
    ...(entries.some((e) => e.kind === 'observe') ? ['reconciliation.resources: {"file:<path>": observe}'] : []),
  ];
  const held = (Object.keys(RESOURCE_KINDS) as ResourceType[]).filter((type) => heldBackByUnbound(type));
  const any = `${held.slice(0, -1).join(', ')} or ${held[held.length - 1]}`;
  return {
    problem: `${names} protect${entries.length > 1 ? '' : 's'} a target the agent cannot establish: no resource of desired state is ${keys} and .datum/claims.json has no binding for it (lost with .datum/, or the key was never seen), so any ${any} of this node may be it, and none is written`,
    fix: `name the target in agent.yaml (${spell.join(' or ')}), or remove ${names} if it protects nothing`,
  };
}

/** The entries that protect `key`, which claims `target` now: by its name, or through the target. */
export function protecting(guard: Pick<Guard, 'entries'>, key: string, target: string | null): ResolvedEntry[] {
  return guard.entries.filter((e) => e.name === key || (target !== null && e.target === target));
}

/**
 * What an observation says about protections: the overrides and per-resource modes under the keys
 * that claim protected targets now (as well as under their own names), which entry protects each
 * key through a target, and the decisions held for the current keys.
 */
export function observedProtections(
  guard: Guard,
  resources: Record<string, ResourceSpec>,
): Pick<Observation, 'overrides' | 'resource_modes' | 'protections' | 'decisions'> {
  const out: Pick<Observation, 'overrides' | 'resource_modes' | 'protections' | 'decisions'> = {
    overrides: {},
    resource_modes: {},
    protections: {},
    decisions: {},
  };
  const ident = guard.identify ?? asSpelled;
  const targetFor = (key: string, spec: ResourceSpec) => ident(targetOf(key, spec));
  const claimed = new Set(Object.entries(resources).map(([key, spec]) => targetFor(key, spec)));
  for (const e of guard.entries) {
    // Under its own name unless another key claims its target now: then that key is reported.
    const movedOn = !(e.name in resources) && e.target !== null && claimed.has(e.target);
    if (namesTarget(e.name) || movedOn) continue;
    if (e.kind === 'override') out.overrides[e.name] = e.provenance;
    else out.resource_modes[e.name] = 'observe';
  }
  for (const key of Object.keys(resources).sort()) {
    const spec = resources[key];
    if (!spec) continue;
    const target = targetFor(key, spec);
    for (const e of protecting(guard, key, target)) {
      if (e.kind === 'override' && !(key in out.overrides)) out.overrides[key] = e.provenance;
      if (e.kind === 'observe') out.resource_modes[key] = 'observe';
      if (e.name !== key) (out.protections[key] ??= []).push({ entry: e.entry, kind: e.kind, target: e.target });
    }
    const held = guard.decisions.targets[target];
    if (held) out.decisions[key] = held;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Operator decisions

/**
 * Keeps (yield, conflict) or ends (retake) the decision for a target. A conflict never replaces
 * a yield for the same spec: the operator's decision outranks Datum's finding. `admit` runs first
 * under the same lock as every write that ends a decision (it throws to refuse: the fence), so no
 * such write can come between its check and the record.
 */
export async function recordDecisionAt(
  root: string,
  request: RecordDecisionRequest,
  admit: () => Promise<void> = () => Promise.resolve(),
): Promise<OperatorDecision | null> {
  return await withLock(`records:${root}`, async () => {
    await admit();
    // Kept under the target's identity, whatever spelling the controller sent (and earlier
    // records of other spellings of it are this one's).
    const stored = await readDecisions(root);
    const ident = await identify(root, [request.target, ...Object.keys(stored.targets)]);
    const file = decisionsAs(stored, ident);
    const target = ident(request.target);
    const prior = file.targets[target];
    if (request.kind === 'retake') delete file.targets[target];
    else if (!(request.kind === 'conflict' && prior?.kind === 'yield' && sameIntent(prior, request))) {
      const { node: _node, ...rest } = request;
      file.targets[target] = operatorDecision.parse({ ...rest, target, kind: request.kind });
    }
    await writeRecord(root, 'decisions.json', file);
    return file.targets[target] ?? null;
  });
}

/**
 * After an apply to `target` of another value than a standing decision's, that decision is over:
 * the new intent has acted (a value reverted later is judged afresh). Never a yield: the agent
 * refuses every write to a yielded target until an operator retakes it.
 */
export async function endDecisionsFor(root: string, target: string, written: IntentDigests | null): Promise<void> {
  await withLock(`records:${root}`, async () => {
    const stored = await readDecisions(root);
    const file = decisionsAs(stored, await identify(root, [target, ...Object.keys(stored.targets)]));
    const held = file.targets[target];
    if (!held || !written || held.kind === 'yield' || sameIntent(held, written)) return;
    delete file.targets[target];
    await writeRecord(root, 'decisions.json', file);
  });
}

/** After an accepted apply: the key claims the target (its identity), from the action's generation. */
export async function claimOnApply(root: string, key: string, target: string, generation: number, at: Date): Promise<void> {
  await withLock(`records:${root}`, async () => {
    const stored = await readClaims(root);
    const before = claimsAs(stored, await identify(root, [target, ...Object.keys(stored.targets)]));
    const prior = before.targets[target];
    if (prior && prior.generation !== null && generation < prior.generation) return;
    const claims: ClaimsFile = {
      ...before,
      targets: {
        ...before.targets,
        [target]: { resource_key: key, generation, since: prior?.resource_key === key ? prior.since : at.toISOString() },
      },
      keys: { ...before.keys, [key]: { target, generation } },
    };
    await writeRecord(root, 'claims.json', claims);
  });
}

/**
 * After an approved removal took the target: no key claims it any more (a later generation that
 * declares it again claims it afresh), so it is never planned for removal twice.
 */
export async function forgetClaim(root: string, target: string): Promise<void> {
  await withLock(`records:${root}`, async () => {
    const stored = await readClaims(root);
    const claims = claimsAs(stored, await identify(root, [target, ...Object.keys(stored.targets)]));
    if (!claims.targets[target] && !Object.values(claims.keys).some((k) => k.target === target)) return;
    delete claims.targets[target];
    const keys = Object.fromEntries(Object.entries(claims.keys).filter(([, k]) => k.target !== target));
    await writeRecord(root, 'claims.json', { ...claims, keys });
  });
}

/**
 * After the node's fence was moved back to `to` (`datum agent reset-fence`): the claims made from
 * a generation above it came from the generation published by mistake, and would keep every
 * claim of `to`'s successors out (an older generation's claim never replaces a newer one). They
 * keep their key and target, with the generation no longer known, so the next claim replaces them.
 */
export async function forgetClaimGenerationsAbove(root: string, to: number): Promise<void> {
  await withLock(`records:${root}`, async () => {
    const claims = await readClaims(root);
    const above = (g: number | null) => g !== null && g > to;
    if (
      !Object.values(claims.targets).some((c) => above(c.generation)) &&
      !Object.values(claims.keys).some((k) => above(k.generation))
    )
      return;
    const targets: ClaimsFile['targets'] = {};
    for (const [t, c] of Object.entries(claims.targets)) targets[t] = above(c.generation) ? { ...c, generation: null } : c;
    const keys: ClaimsFile['keys'] = {};
    for (const [k, c] of Object.entries(claims.keys)) keys[k] = above(c.generation) ? { ...c, generation: null } : c;
    await writeRecord(root, 'claims.json', { ...claims, targets, keys });
  });
}

export async function readClaims(root: string): Promise<ClaimsFile> {
  if (!(await rootExists(root))) return emptyClaims();
  const data = (await readRecord(root, 'claims.json')) as Partial<ClaimsFile> | null;
  if (!data || typeof data !== 'object') return emptyClaims();
  return { targets: data.targets ?? {}, keys: data.keys ?? {}, bindings: data.bindings ?? {} };
}

export async function readDecisions(root: string): Promise<DecisionsFile> {
  if (!(await rootExists(root))) return { targets: {} };
  const data = (await readRecord(root, 'decisions.json')) as Partial<DecisionsFile> | null;
  const targets: DecisionsFile['targets'] = {};
  for (const [target, d] of Object.entries(data?.targets ?? {})) {
    const parsed = operatorDecision.safeParse(d);
    // A record that does not parse is Datum's own state damaged: it still protects its target.
    targets[target] = parsed.success
      ? parsed.data
      : operatorDecision.parse({
          resource_key: 'unknown',
          target,
          kind: 'conflict',
          spec_digest: UNKNOWN_SPEC,
          by: 'datum',
          at: new Date(0).toISOString(),
        });
  }
  return { targets };
}

/** A record of .datum/, read without creating anything (observe changes nothing it need not). */
async function readRecord(root: string, name: string): Promise<unknown> {
  return await inDatumDir(root, '', false, (dir) => readJsonAt(dir, name), null);
}

async function writeRecord(root: string, name: string, value: unknown): Promise<void> {
  await inDatumDir(root, '', true, (dir) => writeJsonAt(dir, name, value), undefined);
}

async function rootExists(root: string): Promise<boolean> {
  return await isDirectory(root);
}
