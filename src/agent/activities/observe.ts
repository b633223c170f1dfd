import { ApplicationFailure } from '@temporalio/common';
import {
  InvalidAgentConfig,
  pathOfTarget,
  placeOf,
  targetOf,
  type FenceReset,
  type Observation,
  type ObservedResource,
  type ResourceSpec,
} from '../../domain';
import { withFix, type ObserveRequest } from '../../contract';
import {
  guardFor,
  heldBackByUnbound,
  observedProtections,
  protecting,
  requestGuard,
  unboundEntries,
  unboundProblem,
  type Guard,
} from '../node/claims';
import { loadAgentConfig } from '../config';
import { AgentJournal } from '../node/journal';
import { realRoot } from '../fs';
import { undeclaredFlags } from '../providers/flag';
import { providerFor, type NodeContext } from '../providers';
import { AgentRefusal } from '../refusal';
import { assertNode } from './assert-node';
import { type AgentConfig, observation } from '../../schemas';

const now = () => new Date();

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
  const ctx: NodeContext = {
    node: config.node,
    root: await fenceOnObserve(config, request.generation, observedAt),
    config,
    resources: request.resources,
  };

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
    resources: failingClosed(
      withIdentities(resources, request.resources, guard.identify ?? ((t) => t)),
      request.resources,
      guard,
    ),
    undeclared,
    config_error: null,
    fence_reset: await lastReset(ctx.root),
  });
}

/**
 * The last reset of the node's fence, reported with every snapshot so the decision planned from
 * it records the reset in the ledger. None where .datum/ cannot be read safely.
 */
async function lastReset(root: string): Promise<FenceReset | null> {
  try {
    return await new AgentJournal(root).lastReset();
  } catch (err) {
    if (!(err instanceof AgentRefusal)) throw err;
    return null;
  }
}

/**
 * Each path resource (a file, a directory) as written, not as spelled (src/agent/fs/identity.ts):
 * its detail names the target it really writes when a symlinked directory makes that another
 * path, and resources whose paths are two spellings of one place (whatever their types: a file
 * and a directory at one path are one place too) are each obstructed (one target has one owner;
 * writing both would have them overwrite each other), so no write is planned for either.
 */
function withIdentities(
  seen: Record<string, ObservedResource>,
  specs: Record<string, ResourceSpec>,
  identify: (target: string) => string,
): Record<string, ObservedResource> {
  const byPlace = new Map<string, string[]>();
  const identities: Record<string, string> = {};
  for (const [key, spec] of Object.entries(specs)) {
    const spelled = targetOf(key, spec);
    if (pathOfTarget(spelled) === null) continue;
    identities[key] = identify(spelled);
    const place = placeOf(identities[key]);
    byPlace.set(place, [...(byPlace.get(place) ?? []), key]);
  }
  const out = { ...seen };
  for (const [key, identity] of Object.entries(identities)) {
    const r = out[key];
    const spelled = targetOf(key, specs[key]);
    if (!r) continue;
    const detail = identity === spelled ? r.detail : { ...r.detail, identity };
    const others = (byPlace.get(placeOf(identity)) ?? []).filter((k) => k !== key);
    const same = others.every((k) => specs[k]?.type === specs[key]?.type) ? specs[key]?.type : 'path';
    const obstruction =
      r.obstruction ??
      (others.length === 0
        ? null
        : `"${key}" writes ${identity}${identity === spelled ? '' : ` (spelled ${spelled})`}, the same ${same} as ${others.map((k) => `"${k}"`).join(' and ')}: one target has one owner — fix: give each resource its own path in desired state, or remove all but one of them`);
    out[key] = { ...r, detail, obstruction };
  }
  return out;
}

/**
 * While an agent.yaml entry's target cannot be established (src/agent/node/claims.ts unboundEntries),
 * every file and the release not protected otherwise is obstructed, saying why and how to end it:
 * no write is planned for them, and the agent would refuse one.
 */
function failingClosed(
  seen: Record<string, ObservedResource>,
  specs: Record<string, ResourceSpec>,
  guard: Guard,
): Record<string, ObservedResource> {
  const unbound = unboundEntries(guard);
  if (unbound.length === 0) return seen;
  const { problem, fix } = unboundProblem(unbound);
  const out = { ...seen };
  for (const [key, spec] of Object.entries(specs)) {
    const r = out[key];
    const target = (guard.identify ?? ((t: string) => t))(targetOf(key, spec));
    if (!r || r.obstruction !== null || !heldBackByUnbound(spec.type) || protecting(guard, key, target).length > 0) continue;
    out[key] = { ...r, obstruction: withFix(problem, fix) };
  }
  return out;
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
  const provider = providerFor(spec.type);
  if (provider === null)
    throw ApplicationFailure.nonRetryable(
      `observe of "${key}": unknown resource type ${JSON.stringify(spec.type)}`,
      'InvalidAction',
      { resource_key: key },
    );
  return await provider.observe(ctx, key, spec);
}
