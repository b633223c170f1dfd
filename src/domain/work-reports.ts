/*
 * A work item's reports (docs/work-items.md): what a loop's recorded decision tells its items,
 * which items it goes to, the loop's own judgement of a resolution an item forwards, and the
 * check an item makes before it takes a report (its loop's ledger entry says the same). The
 * item's own life, from a report on, is work-items.ts.
 */
import { CONDITION_TYPES, NOTE_REASONS } from '../contract/vocabulary';
import { reconcileWorkflowId } from '../contract/identifiers';
import { canonicalJson } from './canonical';
import type { LedgerEntry } from '../contract/ledger';
import {
  workItemId,
  type LoopResolution,
  type PassReport,
  type ReportedCondition,
  type ReportedResource,
  type WorkCondition,
  type WorkTargetInput,
} from '../contract/work';
import { withFix } from '../contract/fix';
import { needsJudgement } from './conditions';
import type { BoundIntent } from '../contract/desired';
import type { Condition, Decision } from '../contract/ledger';
import type { History } from '../contract/history';
import {
  WORK_RULES,
  allowedResolutions,
  applyWorkResolution,
  isWorkCondition,
  type AppliedResolution,
  type WorkFacts,
} from './work-rules';
import { reportSettles } from './work-items';

// ---------------------------------------------------------------------------------------------
// The loop's side: the report of a recorded decision, and which items it goes to.

/** The report of a recorded decision. `fresh` only for a pass that judged a fresh observation. */
export function passReport(
  decision: Decision,
  intent: BoundIntent,
  at: { seq: number; decided_at: string; loop: string; pass: boolean },
): PassReport {
  return {
    node: intent.node,
    loop: at.loop,
    generation: intent.generation,
    digest: intent.digest,
    ledger_seq: at.seq,
    decided_at: at.decided_at,
    fresh: at.pass && decision.observation_fresh,
    status: decision.convergence_status,
    reason: decision.reason,
    reason_detail: decision.reason_detail,
    mode: decision.mode,
    retry_budget: intent.policy.retry_budget,
    conditions: decision.conditions,
    resources: decision.resources.map((r) => reportedResource(r, intent)),
  };
}

const reportedResource = (r: Decision['resources'][number], intent: BoundIntent): ReportedResource => ({
  resource_key: r.resource_key,
  ownership: r.ownership,
  effective_mode: r.effective_mode,
  declared: Object.hasOwn(intent.resources, r.resource_key),
  protected_by: protections(r.resource_key, r.ownership, r.ownership_provenance),
});

/**
 * The loop's own judgement of a resolution a work item forwards (its resolveWork Update), on
 * what the loop holds now rather than what the item last heard: the condition still open, the
 * resolution one the condition takes, and nothing agent.yaml forbids on the resource as the last
 * decision saw it (the item checked the same; the loop checks again, as anyone with access to
 * the namespace can send the Update). Then what it does to the history (applyWorkResolution).
 */
export function judgeLoopResolution(
  history: History,
  intent: BoundIntent,
  last: Decision | null,
  r: LoopResolution,
  now: string,
): AppliedResolution {
  const seen = last?.resources.find((x) => x.resource_key === r.resource_key);
  const facts: WorkFacts = {
    node: intent.node,
    resource_key: r.resource_key,
    resource: seen ? reportedResource(seen, intent) : null,
    report: { mode: last?.mode ?? null, generation: intent.generation, digest: intent.digest },
  };
  const allowed = allowedResolutions(r.condition, facts).find((a) => a.resolution === r.resolution);
  const refusal = !allowed
    ? withFix(
        `${r.resolution} is not a resolution of ${r.condition}`,
        `use one of ${WORK_RULES[r.condition].map((x) => x.resolution).join(', ')}`,
      )
    : allowed.refused;
  if (refusal) return { history, detail: refusal, error: refusal };
  return applyWorkResolution(history, intent, r, now);
}

/** The agent.yaml entries behind an operator-owned resource (a yield or a resolver's leave is no agent.yaml entry). */
function protections(key: string, ownership: string, provenance: unknown): string[] {
  if (ownership !== 'OPERATOR_OWNED' || !provenance || typeof provenance !== 'object') return [];
  const p = provenance as { via?: unknown; approved_by?: unknown; protected_by?: Array<{ entry?: unknown }> };
  if (p.via !== undefined) return [];
  const entries = (p.protected_by ?? []).map((e) => String(e.entry));
  return entries.length > 0 ? entries : [`overrides.${key} (approved by ${String(p.approved_by)})`];
}

/**
 * Which items a report goes to: every condition needing judgement opens (or attaches to) its
 * item; an item the loop told before whose condition is gone is told too, until a settled report
 * has reached it (that report closes it). `keep` is what the loop remembers for the next report.
 */
export function workTargets(
  report: PassReport,
  known: string[],
): { open: WorkTargetInput[]; tell: string[]; keep: string[]; settles: boolean } {
  const open = report.conditions
    .filter(isLoopCondition)
    .filter((c) => needsJudgement(c.type) && isWorkCondition(c.type))
    .map((c) => ({
      id: workItemId(report.node, c.type as WorkCondition, c.resource_key),
      condition: c.type as WorkCondition,
      resource_key: c.resource_key,
    }));
  const ids = new Set(open.map((t) => t.id));
  const tell = known.filter((id) => !ids.has(id));
  const settles = reportSettles(report);
  return { open, tell, keep: [...ids, ...(settles ? [] : tell)], settles };
}

// ---------------------------------------------------------------------------------------------
// Where a report comes from: an item takes one only once its loop (or the ledger store) confirms it.

/** A condition a loop raises (a report from the fleet carries the fleet's). */
const isLoopCondition = (c: ReportedCondition): c is Condition => (CONDITION_TYPES as readonly string[]).includes(c.type);

/** Whether `loop` is the reconcile loop of the report's node and generation: the only loop that reports to its items. */
export const isNodeLoop = (report: Pick<PassReport, 'node' | 'loop' | 'generation'>): boolean =>
  report.loop === reconcileWorkflowId(report.node, report.generation);

/**
 * Why the ledger entry at the report's seq does not say what the report says, or null when it
 * does: the report is what the loop derived from that entry's decision (passReport), so every
 * field it carries is checked against the entry itself.
 */
export function reportMismatch(report: PassReport, entry: LedgerEntry): string | null {
  const same = (a: unknown, b: unknown) => canonicalJson(a ?? null) === canonicalJson(b ?? null);
  const fields: Array<[string, unknown, unknown]> = [
    ['node', report.node, entry.node_id],
    ['loop', report.loop, entry.workflow_id],
    ['seq', report.ledger_seq, entry.seq],
    ['decided_at', report.decided_at, entry.decided_at],
    ['generation', report.generation, entry.desired_generation],
    ['digest', report.digest, entry.desired_digest],
    ['status', report.status, entry.convergence_status],
    ['reason', report.reason, entry.reason],
    ['reason_detail', report.reason_detail, entry.reason_detail],
    ['mode', report.mode, entry.mode],
    ['retry_budget', report.retry_budget, entry.retry_budget],
    ['conditions', report.conditions, entry.conditions],
    ['resources', report.resources.map(ownershipOf), entry.resources.map(ownershipOf)],
  ];
  const differs = fields.filter(([, a, b]) => !same(a, b)).map(([name]) => name);
  // Only a pass that judged a fresh observation may close or reopen an item; a note never did.
  const freshness = report.fresh && (!entry.observation_fresh || isNoteReason(entry.reason)) ? ['fresh'] : [];
  const wrong = [...differs, ...freshness];
  return wrong.length === 0
    ? null
    : `the entry at ${report.loop} #${report.ledger_seq} does not say what the report says (${wrong.join(', ')})`;
}

const ownershipOf = (r: { resource_key: string; ownership: string; effective_mode: string }) => [
  r.resource_key,
  r.ownership,
  r.effective_mode,
];

const isNoteReason = (reason: string) => (NOTE_REASONS as readonly string[]).includes(reason);
