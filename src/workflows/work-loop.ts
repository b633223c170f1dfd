/*
 * The reconcile loop's side of work items (docs/work-items.md): after a recorded pass it tells the
 * node's work items what the pass found, opening the item of each condition that needs judgement.
 * Which items a report goes to is the domain's (workTargets); this is the wiring. The loop wires
 * it in after each pass that wrote a ledger entry, under a patch (a new command for a running loop).
 */
import { log, proxyLocalActivities } from '@temporalio/workflow';
import { passReport, workTargets, type BoundIntent, type Decision } from '../domain';
import type { ControlActivities } from '../contract';
import { summaryLine } from './summaries';

/** What the loop remembers of its work items, carried across continue-as-new. */
export interface WorkMemory {
  /** Items the loop told and must tell again until a settled report reached them. */
  known: string[];
}

/** The part of the loop a report reads. */
export interface Reporter {
  readonly node: string;
  readonly workflowId: string;
  readonly intent: BoundIntent;
  readonly work: WorkMemory;
}

const work = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', maximumInterval: '10s', maximumAttempts: 5 },
});

/**
 * Tells the node's work items what the recorded decision `seq` found. Nothing to tell (no
 * condition needing judgement, no item told before): no activity, and `inForce` is not asked, so
 * a loop recorded before work items replays its quiet passes as they were.
 */
export async function reportToWork(
  loop: Reporter,
  decision: Decision,
  at: { seq: number; decided_at: string; pass: boolean },
  inForce: () => boolean,
): Promise<void> {
  const report = passReport(decision, loop.intent, { ...at, loop: loop.workflowId });
  const targets = workTargets(report, loop.work.known);
  if (targets.open.length === 0 && targets.tell.length === 0) return;
  if (!inForce()) return;
  try {
    await work.reportWork.executeWithOptions(
      { summary: summaryLine(`report to ${targets.open.length + targets.tell.length} work item(s) of ${loop.node}`) },
      [{ report, open: targets.open, tell: targets.tell }],
    );
    loop.work.known = targets.keep;
  } catch (error) {
    // A work item that cannot be told now is told by the next recorded pass: the loop never stops for it.
    log.warn('work items were not told of this pass; the next recorded pass tells them', {
      node: loop.node,
      error: String(error),
    });
    loop.work.known = [...new Set([...loop.work.known, ...targets.open.map((t) => t.id)])];
  }
}
