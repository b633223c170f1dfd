import { formatDuration, parseDuration, targetOfAction, type AuthorizedAction } from '../../domain';
import type { AcceptedGeneration, AgentJournal } from '../node/journal';
import { sameMarker } from '../markers';
import type { AtWrite, NodeContext } from '../providers/types';
import type { Refusal, Refuse } from './refusals';
import { targetMarker } from './target';

const now = () => new Date();

/**
 * 8–9 (`planHolds`), and 6, 8 and 9 again at the provider's irreversible step (`atWrite`). A fetch
 * or a stop may take minutes after the first checks, and meanwhile a newer generation may observe
 * the node (moving the fence) or another writer may move the marker. The re-check and the step
 * run under the fence's lock, so an observe of a newer generation either comes before the re-check
 * (the write is refused) or after the write (its snapshot shows it): never between the two.
 */
export function writeChecks(
  ctx: NodeContext,
  action: AuthorizedAction,
  journal: AgentJournal,
  refuse: Refuse,
): { planHolds: () => Promise<string | null>; atWrite: AtWrite } {
  // Returns the target's marker as checked: the provider compares it once more right before its swap.
  const planHolds = async () => {
    const stale = staleSnapshot(action, now());
    if (stale) throw refuse(stale.type, stale.problem, stale.fix, stale.facts);
    const { refusal, current } = await markerMoved(ctx, action, journal);
    if (refusal) throw refuse(refusal.type, refusal.problem, refusal.fix, refusal.facts);
    return current;
  };
  const mayWrite = async (accepted: AcceptedGeneration | null) => {
    const stale = staleGeneration(action.desired_generation, accepted, ctx.node);
    if (stale) throw refuse(stale.type, stale.problem, stale.fix, stale.facts);
    return await planHolds();
  };
  return { planHolds, atWrite: (step) => journal.whileFenced(mayWrite, step, `write ${action.desired_generation}`) };
}

/** 6. The fence's refusal of a request (an apply, a decision) of `generation`, or null when it is not below it. */
export function staleGeneration(generation: number, accepted: AcceptedGeneration | null, node: string): Refusal | null {
  if (accepted === null || generation >= accepted.generation) return null;
  const how = {
    apply: `first for "${accepted.resource_key}"`,
    observe: 'when its workflow observed the node',
    decision: `when its workflow recorded a decision on "${accepted.resource_key}"`,
    reset: 'when an operator reset the fence to it',
  }[accepted.by];
  return {
    type: 'StaleGenerationRefusal',
    problem: `it is for generation ${generation}, but this agent already accepted generation ${accepted.generation} for node ${node} (${how})`,
    fix: `if generation ${accepted.generation} is right, this loop's intent is old and its node's newer loop acts (datum describe ${node} shows it); if ${accepted.generation} was published by mistake, end that generation's loop, then on ${node} itself, with its agent stopped, run datum agent reset-fence --node ${node} --to ${generation} --by WHO --reason WHY (docs/operations.md, "A generation published by mistake")`,
    facts: { desired_generation: generation, accepted_generation: accepted.generation, accepted_by: accepted.by },
  };
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
async function markerMoved(
  ctx: NodeContext,
  action: AuthorizedAction,
  journal: AgentJournal,
): Promise<{ refusal: Refusal | null; current: string | null }> {
  const current = await targetMarker(ctx, action);
  // Compared by sameMarker: a plan made from an older agent's snapshot carries the short spelling.
  return { refusal: sameMarker(current, action.observed_marker) ? null : await movedBy(ctx, action, journal, current), current };
}

async function movedBy(
  ctx: NodeContext,
  action: AuthorizedAction,
  journal: AgentJournal,
  current: string | null,
): Promise<Refusal> {
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
