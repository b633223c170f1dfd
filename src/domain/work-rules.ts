import type {
  AllowedResolution,
  ItemKind,
  LoopResolution,
  PassReport,
  ReportedResource,
  ResolutionKind,
  WorkCondition,
  WorkKind,
} from '../contract/work';
import type { History } from '../contract/history';
import { withoutEpisode } from './deadline';
import { recordResolution } from './history';
import type { BoundIntent } from '../contract/desired';

/*
 * Which resolutions a work item allows, per condition, what each does to the loop, and when the
 * node's own agent.yaml forbids one (docs/work-items.md). A resolution is a person's or a
 * program's judgement handed back to the loop; it never clears a condition by itself: the item
 * closes only when a fresh observation shows the condition gone (work-items.ts).
 */

export interface ResolutionRule {
  resolution: ResolutionKind;
  /** One sentence: what the loop does when it is given. */
  does: string;
  /**
   * cleared: Datum acts (or stops treating something as unknown), and the next fresh observation
   * must show the condition gone, else the item reopens. standing: the resolver accepts the
   * condition as it is; the item holds until an observation shows it gone.
   */
  expects: 'cleared' | 'standing';
  /** It has Datum write the resource: refused where agent.yaml keeps Datum from writing it. */
  writes: boolean;
  /** A refusal this resolution has on this node beyond agent.yaml's, or null. */
  refuse?: (facts: WorkFacts) => string | null;
}

/** What the item knows of its resource and node from the last report. */
export interface WorkFacts {
  node: string;
  resource_key: string | null;
  resource: ReportedResource | null;
  report: Pick<PassReport, 'mode' | 'generation' | 'digest'>;
}

/** A resolution that accepts the condition as it stands: hold (or decline, for a destructive repair). */
const HOLD = (what: string, resolution: 'hold' | 'decline' = 'hold'): ResolutionRule => ({
  resolution,
  does: `Leaves ${what} as it is and records who decided so; the item stays open (HELD, not escalating) until an observation shows the condition gone.`,
  expects: 'standing',
  writes: false,
});

/**
 * The table. Each condition's set is small on purpose: what a resolver may decide without
 * editing desired state or agent.yaml, whose authors keep those decisions (a resolution changes
 * neither file, so it can never switch a host to enforce or take a target an operator owns).
 */
export const WORK_RULES: Record<WorkCondition, readonly ResolutionRule[]> = {
  // Another writer: only a person knows which writer is right. Today's resolveConflict, forwarded.
  CONFLICTING_WRITER: [
    {
      resolution: 'retake',
      does: 'Datum owns the resource again: the next pass repairs it with a fresh retry budget (the other writer must be stopped, or it is a conflict again).',
      expects: 'cleared',
      writes: true,
    },
    {
      resolution: 'yield',
      does: 'Leaves the resource to the other writer: recorded as an operator exception, which the agent keeps across generations while the desired value is unchanged.',
      expects: 'cleared',
      writes: false,
    },
  ],
  // A repair that did not take within retry_budget: more attempts, or stop asking.
  RETRY_BUDGET_EXHAUSTED: [
    {
      resolution: 'grant',
      does: 'Grants N more repair attempts (1 to retry_budget) for this episode; the next pass repairs again.',
      expects: 'cleared',
      writes: true,
    },
    HOLD('the node blocked'),
  ],
  // A repair episode that outlived policy.repair_deadline: the same choice, in time as in attempts.
  REPAIR_DEADLINE_EXCEEDED: [
    {
      resolution: 'grant',
      does: 'Grants N more repair attempts (1 to retry_budget) and a fresh repair_deadline counted from the next repair; the next pass repairs again.',
      expects: 'cleared',
      writes: true,
    },
    HOLD('the node blocked'),
  ],
  // The only repair destroys something (seed 004 P3): a repair never does it on its own.
  DESTRUCTIVE_REPAIR_REQUIRED: [
    {
      resolution: 'approve',
      does: 'Approves this exact destructive action once, bound to the target, the desired digest and the obstruction observed.',
      expects: 'cleared',
      writes: true,
      // Every agent refuses a destructive action (DestructiveActionRefusal), whoever approves it:
      // defence in depth, documented in docs/architecture.md §4. Until an agent can carry out an
      // approval bound to what it observed, approving would only be refused on the node.
      refuse: () =>
        'the node agent refuses every destructive action (DestructiveActionRefusal), approved or not — fix: clear the obstruction on the node yourself (the item closes when an observation shows it gone), or decline',
    },
    HOLD('the obstruction in place: nothing is destroyed', 'decline'),
  ],
  // Nobody is proven to own it: Datum may stop asking, or manage what desired state declares.
  UNKNOWN_OWNERSHIP: [
    {
      resolution: 'leave',
      does: "Datum leaves the resource to whoever has it: recorded as an operator exception with the resolver's name for this generation, never touched, and no longer blocking the node.",
      expects: 'cleared',
      writes: false,
    },
    {
      resolution: 'adopt',
      does: 'Datum manages the resource as desired state declares it, from the next pass on.',
      expects: 'cleared',
      writes: true,
      refuse: (facts) =>
        facts.resource?.declared
          ? null
          : `desired state does not declare "${facts.resource_key}", so there is nothing to manage it to — fix: declare it in desired/nodes/${facts.node}.yaml under a new generation (or leave it)`,
    },
  ],
  // The agent said no: try again once something the loop cannot see changed, or stop asking.
  ACTION_REFUSED: [
    {
      resolution: 'retry',
      does: 'Forgets the standing refusal so the next pass plans and asks the agent again (for a cause fixed outside what the loop observes).',
      expects: 'cleared',
      writes: true,
    },
    HOLD('the refusal standing'),
  ],
  // The authority's content changed without a new generation: accept it, or wait for its author.
  INTENT_DIGEST_MISMATCH: [
    {
      resolution: 'rebind',
      does: "Re-binds this generation to the authority's current content (as `datum refresh` does); the next pass judges the node against it.",
      expects: 'cleared',
      writes: false,
    },
    HOLD('the loop bound to the content it was started with (nothing acts until a new generation)'),
  ],
  // Drift Datum only reports: writing it is what observe mode forbids, so only acknowledging is
  // left; the drift clears when it is fixed by hand, desired state changes or agent.yaml enforces.
  OBSERVED_DRIFT: [HOLD("the drift reported and untouched (observe mode is agent.yaml's choice)")],
  // The fleet's (src/domain/fleet.ts): starting or ending a loop is a rollout's or an operator's
  // act (the condition names it); the item records who decided the node stays as it is.
  NO_RUNNING_LOOP: [HOLD('the node without a reconcile loop (nothing observes or repairs it)')],
  NO_DESIRED_STATE: [HOLD('the loop running for a node the authority no longer declares')],
};

/**
 * The resolutions of work no loop's condition opens (ITEM_KINDS): the rollout or the item itself
 * carries them out, never a loop. Whether one is refused on a given item is the item's to say
 * (a rollback with nothing to roll back to, an approval agent.yaml does not allow).
 */
export const ITEM_RULES: Record<ItemKind, readonly ResolutionRule[]> = {
  // A rollout halted at a failed gate: the later waves wait on this judgement.
  ROLLOUT_HALTED: [
    {
      resolution: 'continue',
      does: 'The rollout goes on with the next wave; the failing nodes stay as they are, their loops go on.',
      expects: 'cleared',
      writes: false,
    },
    {
      resolution: 'abort',
      does: 'The rollout ends here: no later wave starts; the loops it started go on.',
      expects: 'cleared',
      writes: false,
    },
    {
      resolution: 'rollback',
      does: "Writes, for every node this rollout started, a new generation with the content of the generation its loop had before (the authority's file says so, and who asked), and rolls that out; no later wave starts.",
      expects: 'cleared',
      writes: true,
    },
  ],
  // A destructive change planned by desired state or by a decommission: only consent carries it out.
  PLANNED_REMOVAL: [
    {
      resolution: 'approve',
      does: "The node's agent removes exactly the targets listed, once, each moved into its backup area (.datum/backup/) and recorded in .datum/removals.jsonl.",
      expects: 'cleared',
      writes: true,
    },
    {
      resolution: 'decline',
      does: 'Nothing is removed; the item closes, recording who decided so.',
      expects: 'cleared',
      writes: false,
    },
  ],
};

/** The work conditions the fleet workflow raises: their items report from, and resolve to, the fleet. */
export const FLEET_WORK_CONDITIONS: readonly WorkCondition[] = ['NO_RUNNING_LOOP', 'NO_DESIRED_STATE'];
export type LoopWorkCondition = Exclude<WorkCondition, 'NO_RUNNING_LOOP' | 'NO_DESIRED_STATE'>;

/** A resolution a reconcile loop can take: of a condition a loop raises, not one of the fleet's. */
export function isLoopResolution(r: LoopResolution): r is LoopResolution & { condition: LoopWorkCondition } {
  return !FLEET_WORK_CONDITIONS.includes(r.condition);
}

export const WORK_CONDITIONS = Object.keys(WORK_RULES) as WorkCondition[];
/** Every kind of work item `datum work list --condition` takes. */
export const WORK_KINDS = [...WORK_CONDITIONS, ...(Object.keys(ITEM_RULES) as ItemKind[])] as WorkKind[];

export function isWorkCondition(type: string): type is WorkCondition {
  return Object.hasOwn(WORK_RULES, type);
}

export function ruleOf(condition: WorkKind, resolution: ResolutionKind): ResolutionRule | null {
  const rules = isWorkCondition(condition) ? WORK_RULES[condition] : ITEM_RULES[condition];
  return rules.find((r) => r.resolution === resolution) ?? null;
}

/**
 * Why agent.yaml keeps Datum from writing the resource, or null: observe mode (the host's or the
 * resource's) and an operator's override. The agent would refuse such a write anyway; the item
 * refuses the resolution first and says which line to change.
 */
export function agentForbids(facts: WorkFacts): string | null {
  const r = facts.resource;
  if (!r) return null;
  if (r.effective_mode === 'observe') {
    const where =
      facts.report.mode === 'observe' ? 'reconciliation.mode: observe' : `reconciliation.resources.${r.resource_key}: observe`;
    return `agent.yaml on ${facts.node} says ${where}, so Datum may not write "${r.resource_key}" and the agent would refuse it — fix: change that line of the node's agent.yaml to enforce, then resolve again (or choose a resolution that writes nothing)`;
  }
  if (r.ownership === 'OPERATOR_OWNED' && r.protected_by.length > 0) {
    return `agent.yaml on ${facts.node} protects "${r.resource_key}" (${r.protected_by.join(', ')}), so Datum may not write it — fix: remove that entry from the node's agent.yaml, then resolve again (or choose a resolution that writes nothing)`;
  }
  return null;
}

/** Every resolution of the condition, with why it would be refused on this node now. */
export function allowedResolutions(condition: WorkCondition, facts: WorkFacts): AllowedResolution[] {
  return WORK_RULES[condition].map((rule) => ({
    resolution: rule.resolution,
    does: rule.does,
    refused: refusalOf(rule, facts),
  }));
}

function refusalOf(rule: ResolutionRule, facts: WorkFacts): string | null {
  return (rule.writes ? agentForbids(facts) : null) ?? rule.refuse?.(facts) ?? null;
}

// ---------------------------------------------------------------------------------------------
// What a resolution does to the loop's history (the loop's resolveWork Update runs this).

export interface AppliedResolution {
  history: History;
  /** The ledger note's sentence, or the error that refuses it (nothing recorded then). */
  detail: string;
  error: string | null;
}

/**
 * The loop's side: checks the resolution against what its history holds now (a grant needs a
 * spent budget, a retake an open conflict) and returns the history it leaves. The loop records
 * the note and passes again at once; the condition closes only on that pass's observation.
 */
export function applyWorkResolution(history: History, intent: BoundIntent, r: LoopResolution, now: string): AppliedResolution {
  const key = r.resource_key;
  const open = history.conditions.some((c) => c.type === r.condition && c.resource_key === key);
  const effect = open
    ? EFFECTS[r.resolution](history, intent, r, now)
    : { error: `${intent.node} has no open ${r.condition}${key ? ` on "${key}"` : ''} now` };
  if ('error' in effect) return { history, detail: effect.error, error: effect.error };
  const who = `${r.by}${r.identity ? ` (${r.identity})` : ''}`;
  return {
    history: effect.history,
    detail: `${who} resolved ${r.condition}${key ? ` on "${key}"` : ''} by ${effect.what}${r.note ? ` (${r.note})` : ''} [${r.item_id}]; it closes when a fresh observation confirms it.`,
    error: null,
  };
}

type Effect = { history: History; what: string } | { error: string };

const unchanged =
  (what: string) =>
  (history: History): Effect => ({ history, what });

/** Each resolution's effect on the history, or why the history cannot take it now. */
const EFFECTS: Record<ResolutionKind, (history: History, intent: BoundIntent, r: LoopResolution, now: string) => Effect> = {
  retake: (history, _intent, r, now) => conflictEffect(history, r, now),
  yield: (history, _intent, r, now) => conflictEffect(history, r, now),
  grant: (history, intent, r) => {
    const budget = intent.policy.retry_budget;
    const n = r.attempts ?? 0;
    if (!Number.isInteger(n) || n < 1 || n > budget)
      return { error: `grant takes 1 to ${budget} attempts (retry_budget), not ${n}` };
    // The attempts left become n (or stay more, for a deadline hit first): the ledger's
    // attempt_count stays within retry_budget. The episode's repair_deadline starts again with the
    // next repair, or the grant would be withheld.
    const granted = { ...withoutEpisode(history), attempt_count: Math.max(0, Math.min(history.attempt_count, budget - n)) };
    const fresh = intent.policy.repair_deadline ? ` and a fresh repair_deadline of ${intent.policy.repair_deadline}` : '';
    return { history: granted, what: `granting ${n} more attempt(s)${fresh}` };
  },
  retry: (history, _intent, r) => {
    const { [r.resource_key ?? '']: _gone, ...refused } = history.refused;
    return { history: { ...history, refused }, what: 'retry' };
  },
  leave: (history, _intent, r, now) => ({
    history: { ...history, left: { ...history.left, [r.resource_key ?? '']: { by: r.by, note: r.note, at: now } } },
    what: 'leave',
  }),
  // hold and decline change nothing; adopt is judged by the next pass from desired state; rebind
  // is carried out by the loop itself (it re-reads the authority); approve is refused by the item.
  hold: unchanged('hold'),
  decline: unchanged('decline'),
  adopt: unchanged('adopt'),
  rebind: unchanged('rebind'),
  approve: unchanged('approve'),
  // Resolutions of a halted rollout: never a loop's (parseLoopResolution takes loop conditions only).
  continue: unchanged('continue'),
  abort: unchanged('abort'),
  rollback: unchanged('rollback'),
};

function conflictEffect(history: History, r: LoopResolution, now: string): Effect {
  const resolution = r.resolution === 'yield' ? 'yield' : 'retake';
  const resolved = recordResolution(history, { resource_key: r.resource_key ?? '', resolution, by: r.by, note: r.note }, now);
  return resolved.error ? { error: resolved.error } : { history: resolved.history, what: resolution };
}
