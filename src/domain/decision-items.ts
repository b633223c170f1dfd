import { withFix } from '../contract/fix';
import type { Json } from '../contract/json';
import type { AllowedResolution, GateItemInput, WorkItem, WorkResolution } from '../contract/work';
import type { RemovalCause, RemovalPlan, RemovalResult } from '../contract/removal';
import type { CheckedResolve } from './work-payloads';
import { ITEM_RULES } from './work-rules';

/*
 * The work no loop's condition opens, as pure functions of what is known and the time
 * (docs/work-items.md): a rollout halted at a failed gate (ROLLOUT_HALTED), and a planned
 * removal (PLANNED_REMOVAL). Both are WorkItems, so `datum work` lists, shows, claims and
 * resolves them as it does every other; the workflows (src/workflows/rolloutGate.ts,
 * removal.ts) wire these to timers and Updates, and carry out what a resolution decides.
 */

function blank(id: string, node: string, kind: WorkItem['condition'], resourceKey: string, now: string): WorkItem {
  return {
    id,
    node,
    condition: kind,
    resource_key: resourceKey,
    state: 'OPEN',
    opened_at: now,
    reopened: 0,
    since: now,
    message: '',
    evidence: null,
    tried: [],
    resolver: 'operator',
    loop: '',
    target: { generation: 0, digest: '' },
    mode: null,
    retry_budget: 0,
    resource: null,
    allowed: [],
    ledger: [],
    claim: null,
    resolution: null,
    resolutions: [],
    escalated_at: null,
    closed: null,
  };
}

// ---------------------------------------------------------------------------------------------
// A halted rollout.

/** The halted wave's item: its failing nodes with their entries, the waves that wait, what a rollback writes. */
export function openGateItem(id: string, input: GateItemInput, now: string): WorkItem {
  const h = input.halt;
  const names = h.failing.map((f) => f.node).join(', ');
  const later = h.later_waves.length;
  const rollable = h.rollback.filter((t) => !('error' in t));
  return {
    ...blank(id, id.split('/')[1] ?? h.rollout, 'ROLLOUT_HALTED', `wave-${h.wave + 1}`, now),
    message: `Rollout ${h.rollout} of generation ${h.generation} halted at ${h.wave_name}: ${h.failing.length} node(s) failed its gate (${names}); ${later} later wave(s) have not started.`,
    evidence: { failing: h.failing },
    loop: h.rollout,
    target: { generation: h.generation, digest: '' },
    allowed: ITEM_RULES.ROLLOUT_HALTED.map((rule) => ({
      resolution: rule.resolution,
      does: rule.does,
      refused:
        rule.resolution === 'rollback' && rollable.length === 0
          ? withFix(
              'no node this rollout started has earlier content kept to go back to',
              'continue or abort, and write the desired state of the failing nodes by hand',
            )
          : null,
    })),
    ledger: input.ledger,
    gate: h,
  };
}

/** The resolution given: the item closes; the rollout that waits on it carries it out. */
export function gateResolved(item: WorkItem, r: CheckedResolve, identity: string | null, now: string): WorkItem {
  return resolvedAndClosed(
    item,
    given(item, r, identity, now),
    `${r.by} resolved it by ${r.resolution}${r.note ? ` (${r.note})` : ''}; ${item.loop} carries it out (datum rollout status ${item.loop}).`,
  );
}

/** An item closed by the resolution just given, saying what came of it. */
function resolvedAndClosed(item: WorkItem, resolution: WorkResolution, detail: string): WorkItem {
  return {
    ...item,
    state: 'CLOSED',
    claim: null,
    resolution,
    resolutions: [...item.resolutions, resolution],
    closed: { at: resolution.at, ledger_seq: -1, detail },
  };
}

function given(item: WorkItem, r: CheckedResolve, identity: string | null, now: string): WorkResolution {
  return {
    resolution: r.resolution,
    attempts: null,
    by: r.by,
    identity,
    note: r.note,
    at: now,
    ledger_seq: -1,
    loop: item.loop,
    expects: 'cleared',
    outcome: 'cleared',
  };
}

// ---------------------------------------------------------------------------------------------
// A planned removal.

/** How a removal item that could not be planned closes (a refused decommission, an agent that could not plan). */
export const NO_PLAN = 'No plan was made, so nothing is removed';

const causeWords = (cause: RemovalCause) =>
  cause.kind === 'dropped'
    ? `what desired state no longer declares as of generation ${cause.generation}`
    : `everything Datum holds, as the node is decommissioned by ${cause.by}${cause.note ? ` (${cause.note})` : ''}`;

/** The item while the node's agent makes the plan: nothing to judge yet. */
export function planningRemoval(id: string, node: string, cause: RemovalCause, now: string): WorkItem {
  const plan: RemovalPlan = { cause, planned_at: now, generation: null, targets: [], kept: [], done: null };
  return {
    ...blank(id, node, 'PLANNED_REMOVAL', id.split('/').at(-1) ?? '', now),
    state: 'PLANNING',
    message: `Planning the removal of ${causeWords(cause)} on ${node}: waiting for its agent.`,
    target: { generation: cause.kind === 'dropped' ? cause.generation : 0, digest: '' },
    removal: plan,
  };
}

/** The plan made: exactly what would be removed, and which resolutions agent.yaml leaves open. */
export function plannedRemoval(item: WorkItem, plan: RemovalPlan, now: string, reopened = false): WorkItem {
  const refused = plan.targets.filter((t) => t.refused !== null);
  const list = plan.targets.map((t) => `${t.target} (${t.size} bytes)`).join(', ');
  return {
    ...item,
    state: 'OPEN',
    opened_at: now,
    escalated_at: null,
    claim: null,
    reopened: item.reopened + (reopened ? 1 : 0),
    message: `A planned destructive change on ${item.node}: ${causeWords(plan.cause)}. Approving removes exactly ${plan.targets.length} target(s): ${list}. Nothing is removed without it.`,
    evidence: { targets: plan.targets, kept: plan.kept } as unknown as Json,
    target: { generation: plan.generation ?? item.target.generation, digest: '' },
    allowed: ITEM_RULES.PLANNED_REMOVAL.map((rule): AllowedResolution => ({
      resolution: rule.resolution,
      does: rule.does,
      refused:
        rule.resolution === 'approve' && refused.length > 0
          ? `${refused.map((t) => `${t.target}: ${t.refused}`).join('; ')} (an approval removes all of them or none)`
          : null,
    })),
    removal: plan,
  };
}

/** Nothing to remove (or the plan could not be made): the item closes at once, saying why. */
export function removalClosed(item: WorkItem, detail: string, now: string, plan: RemovalPlan | null = null): WorkItem {
  return {
    ...item,
    state: 'CLOSED',
    claim: null,
    ...(plan ? { removal: plan } : {}),
    closed: { at: now, ledger_seq: -1, detail },
  };
}

/** An approval carried out, or a decline: the item closes with what was done. */
export function removalResolved(
  item: WorkItem,
  r: CheckedResolve,
  identity: string | null,
  done: RemovalResult | null,
  now: string,
): WorkItem {
  const resolution = given(item, r, identity, now);
  const removal = item.removal ? { ...item.removal, done } : item.removal;
  const detail = done
    ? `${r.by} approved it; ${item.node}'s agent removed ${done.removed.length} target(s), each kept in its backup area: ${done.removed.map((x) => `${x.target} → ${x.backup}`).join(', ')} (recorded in ${done.record}).`
    : `${r.by} declined it${r.note ? ` (${r.note})` : ''}: nothing was removed.`;
  return resolvedAndClosed(removal ? { ...item, removal } : item, resolution, detail);
}
