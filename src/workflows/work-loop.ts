/*
 * The reconcile loop's side of work items (docs/work-items.md): after a recorded pass it tells the
 * node's work items what the pass found, opening the item of each condition that needs judgement.
 * Which items a report goes to is the domain's (workTargets); this is the wiring. Whether a run
 * reports at all is the work-items patch, asked once as the run starts (openWork).
 */
import { log, proxyLocalActivities } from '@temporalio/workflow';
import { passReport, workTargets, type BoundIntent, type Decision, type LedgerEntry } from '../domain';
import { WORKFLOW_PATCH, type ControlActivities, type ReconcileCarry, type WorkMemory } from '../contract';
import { inForce } from './patches';
import { summaryLine } from './summaries';

/** What the loop knows of its work items: carried across continue-as-new, and whether this run reports. */
export interface LoopWork extends WorkMemory {
  /** The work-items patch is in force for this run (a run recorded before it reports nothing). */
  readonly live: boolean;
}

/** Whether this run reports to work items: asked first thing in a run, before any local activity (the registry's story). */
export const workItemsLive = (): boolean => inForce(WORKFLOW_PATCH.workItems);

/** A carry from before work items has no memory of them: its chain looks its node's open items up at its first report. */
export function openWork(live: boolean, carry: ReconcileCarry | null): LoopWork {
  return { live, known: carry?.work?.known ?? [], discovered: carry?.work?.discovered ?? false };
}

export const carryWork = (work: LoopWork): WorkMemory => ({ known: work.known, discovered: work.discovered });

/** The part of the loop a report reads. */
export interface Reporter {
  readonly node: string;
  readonly workflowId: string;
  readonly intent: BoundIntent;
  readonly work: LoopWork;
  readonly ledger: { readonly entries: LedgerEntry[] };
}

const work = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', maximumInterval: '10s', maximumAttempts: 5 },
});

/**
 * Tells the node's work items what the pass recorded as ledger entry `seq` found (a pass that
 * wrote no entry tells nothing). Nothing to tell (no condition needing judgement, no item told
 * before, the node's open items already looked up): no activity, so a steady loop's quiet passes
 * issue no command for it.
 */
export async function reportToWork(loop: Reporter, decision: Decision, seq: number): Promise<void> {
  const entry = loop.ledger.entries.find((e) => e.seq === seq);
  if (!loop.work.live || !entry) return;
  const report = passReport(decision, loop.intent, { seq, decided_at: entry.decided_at, loop: loop.workflowId, pass: true });
  const targets = workTargets(report, loop.work.known);
  const discover = !loop.work.discovered;
  if (targets.open.length === 0 && targets.tell.length === 0 && !discover) return;
  try {
    const { discovered } = await work.reportWork.executeWithOptions(
      { summary: summaryLine(`report to the work items of ${loop.node}`) },
      [{ report, open: targets.open, tell: targets.tell, discover }],
    );
    // A settled report closes what it tells without the condition; an unsettled one is told again.
    loop.work.known = [...targets.keep, ...(targets.settles ? [] : discovered)];
    loop.work.discovered = true;
  } catch (error) {
    // A work item that cannot be told now is told by the next recorded pass: the loop never stops for it.
    log.warn('work items were not told of this pass; the next recorded pass tells them', {
      node: loop.node,
      error: String(error),
    });
    loop.work.known = [...new Set([...loop.work.known, ...targets.open.map((t) => t.id)])];
  }
}
