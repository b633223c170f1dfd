/*
 * What a judgement stage (authorize before acting, judgeProbe after) found: the ladder's only
 * input (ladder.ts climbs it), and what the stage hands to decide() with it.
 */
import type { Assessment } from './classify';
import type { ActedPass } from './inputs';
import type { Classified } from './verdict';
import type { RefusalRecord } from './writers';
import type { BoundIntent } from '../contract/desired';
import type { ConflictRecord, History } from '../contract/history';
import type { AuthorizedAction, Decision, NodeHold, PlannedAction } from '../contract/ledger';

/** What a judgement stage found: the ladder's only input. */
export interface Evidence {
  /** pre: a pre-action snapshot that authorizes actions; post: the fresh probe after acting. */
  phase: 'pre' | 'post';
  intent: BoundIntent;
  now: string;
  /** The history the pass started with (earlier conditions keep what was tried). */
  history: History;
  judged: Classified;
  acted: ActedPass | null;
  /** Repairs tried in this episode, this pass included. */
  attempts: number;
  conflicts: Record<string, ConflictRecord>;
  /** Resources with an unresolved conflict. */
  blocking: string[];
  refused: Record<string, RefusalRecord>;
  /** Refused by the agent in this pass. */
  refused_now: string[];
  /** Refused in this pass because the plan's snapshot was past observation_ttl at the moment of the write (post only). */
  stale_refused: string[];
  /** Refusals nothing has changed about since (post: also this pass's). */
  refused_standing: string[];
  /** Acted on, ran, and the fresh probe still differs with our own marker (seed probe 4). */
  ineffective: string[];
  /** Acted on but not carried out: failed, or skipped after an earlier failure or refusal. */
  failed: string[];
  /** Pre: planned but withheld because retry_budget is spent. Post: drift that appeared meanwhile once this pass spent it. */
  budget_withheld: string[];
  /** Pre: planned but withheld because repair_deadline passed. Post: what a RETRY would come back for after it. */
  deadline_withheld: string[];
  /** Resources with an authorized action (pre: authorized now; post: acted on). */
  authorized: string[];
  /** Drift the next pass could repair that this pass did not touch (post only). */
  drifted_meanwhile: string[];
  /** Some action of this pass was carried out (not refused, not skipped). */
  executed: boolean;
  unknown: Assessment[];
  destructive: PlannedAction[];
  observe_only: Assessment[];
  /** Managed drift an enforcing host would repair, held back by an operator's hold on the node. */
  held: Assessment[];
  enforced_drift: string[];
}

/** What a judgement stage hands to decide(): the ladder's evidence and what the Decision records. */
export interface Judgement {
  evidence: Evidence;
  planned: PlannedAction[];
  authorized: AuthorizedAction[];
  history: History;
  conflict_evidence: Decision['conflicting_writer_evidence'];
}

/** The concerns read straight off the judged snapshot and the plan, the same in both phases. */
export function resourceConcerns(
  judged: Classified,
  planned: PlannedAction[],
  hold: NodeHold | null,
): Pick<Evidence, 'unknown' | 'destructive' | 'observe_only' | 'held' | 'enforced_drift'> {
  const managedDrift = judged.assessments.filter((a) => a.ownership === 'MANAGED' && a.drift);
  const enforced = managedDrift.filter((a) => a.effective_mode === 'enforce');
  return {
    unknown: judged.assessments.filter((a) => a.ownership === 'UNKNOWN'),
    destructive: planned.filter((p) => p.destructive),
    observe_only: managedDrift.filter((a) => a.effective_mode === 'observe'),
    held: hold ? enforced : [],
    enforced_drift: hold ? [] : enforced.map((a) => a.resource_key),
  };
}
