import { log } from '@temporalio/activity';
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure, TypedSearchAttributes } from '@temporalio/common';
import {
  CONTROL_TASK_QUEUE,
  DatumConditions,
  DatumNode,
  DatumStatus,
  MEMO_SUMMARY,
  WORKFLOW_TYPES,
  WORK_ESCALATE_AFTER_DEFAULT,
  loopResolveWorkUpdate,
  withFix,
  workReportSignal,
  type LoopResolution,
  type LoopResolutionResult,
  type PassReport,
  type ReportCheck,
  type UpdateRef,
  type WorkItemWorkflow,
  type WorkReportInput,
  workQuery,
  ledgerQuery,
} from '../contract';
import { describeItem, isFleetReport, isNodeLoop, parseDuration, reportMismatch, type LedgerEntry } from '../domain';
import { confirmFleetReport } from './fleet-confirm';
import type { LedgerStore } from './ledger-store';

/*
 * The controller's side of work items (docs/work-items.md): the loop's reports reach its items,
 * an item's resolution reaches its loop, and the identity Temporal recorded for an Update is read
 * back from the workflow's history (workflow code is not told who sent an Update or a signal).
 */

/** How long an item may stay unclaimed before it escalates: DATUM_WORK_ESCALATE_AFTER, else 1h. */
export function workEscalateAfter(env: NodeJS.ProcessEnv = process.env): string {
  const value = env.DATUM_WORK_ESCALATE_AFTER;
  if (value === undefined || value === '') return WORK_ESCALATE_AFTER_DEFAULT;
  if (parseDuration(value) === null)
    throw new Error(withFix(`DATUM_WORK_ESCALATE_AFTER=${value} is not a duration`, 'set it like 30m or 2h, or unset it (1h)'));
  return value;
}

export function createWorkActivities(client: () => Client, escalateAfter: string, ledger?: LedgerStore) {
  return {
    reportWork: (input: WorkReportInput) => reportWork(client(), input, escalateAfter),
    confirmReport: (report: PassReport) => confirmReport(client(), ledger, report),
    updateRequester: (ref: UpdateRef): Promise<string | null> => requesterOf(client(), ref),
    forwardResolution: (input: ForwardInput) => forwardResolution(client(), input),
  };
}

/**
 * Starts (or attaches to) the item of each open condition, and tells the others the loop told
 * before; with `discover`, also the node's other open items (an earlier loop's), whose ids it answers.
 */
export async function reportWork(c: Client, input: WorkReportInput, escalateAfter: string): Promise<{ discovered: string[] }> {
  const { report } = input;
  const discovered = input.discover ? await openItemsOf(c, report.node, [...input.open.map((t) => t.id), ...input.tell]) : [];
  for (const target of input.open) {
    const what = describeItem({ node: report.node, condition: target.condition, resource_key: target.resource_key });
    await c.workflow.signalWithStart<WorkItemWorkflow, [PassReport]>(WORKFLOW_TYPES.workItem, {
      workflowId: target.id,
      taskQueue: CONTROL_TASK_QUEUE,
      args: [
        {
          node: report.node,
          condition: target.condition,
          resource_key: target.resource_key,
          report,
          escalate_after: escalateAfter,
        },
      ],
      signal: workReportSignal,
      signalArgs: [report],
      staticSummary: `work: ${what}`,
      staticDetails: `Datum needs a judgement on ${what}. \`datum work show ${target.id}\` says what is known and which resolutions it takes; \`datum work resolve ${target.id} --resolution R --by NAME\` resolves it.`,
      memo: { [MEMO_SUMMARY]: `OPEN: ${what}` },
      typedSearchAttributes: new TypedSearchAttributes([
        { key: DatumNode, value: report.node },
        { key: DatumConditions, value: [target.condition] },
        { key: DatumStatus, value: 'OPEN' },
      ]),
    });
  }
  for (const id of [...input.tell, ...discovered]) {
    try {
      await c.workflow.getHandle(id).signal(workReportSignal, report);
    } catch (error) {
      // Closed since (an observation cleared it, or someone ended it): nothing left to tell.
      if (!(error instanceof WorkflowNotFoundError)) throw error;
    }
  }
  return { discovered };
}

/** The node's open work items (visibility) other than `known`. */
async function openItemsOf(c: Client, node: string, known: string[]): Promise<string[]> {
  const ids: string[] = [];
  for await (const w of c.workflow.list({ query: workQuery({ nodes: [node], loopItems: true }), pageSize: 1000 }))
    if (!known.includes(w.workflowId)) ids.push(w.workflowId);
  return ids;
}

/**
 * A report as its source says it (issue 30: a work item takes facts only from its loop). The
 * loop must be the node's reconcile workflow of the report's generation; the entry at the report's
 * seq is the loop's own (its `ledger` query, which also holds entries the store has not confirmed
 * yet), else the ledger store's (the loop ended, or the entry left its tail). Not found, or saying
 * something else: not confirmed, and the item drops the report.
 */
async function confirmReport(c: Client, ledger: LedgerStore | undefined, report: PassReport): Promise<ReportCheck> {
  if (report && typeof report === 'object' && isFleetReport(report)) return confirmFleetReport(c, report);
  if (!report || typeof report !== 'object' || typeof report.node !== 'string' || !isNodeLoop(report))
    return {
      confirmed: false,
      why: `${String(report?.loop)} is not the reconcile loop of node ${String(report?.node)} at generation ${String(report?.generation)}`,
    };
  const fromLoop = await loopEntry(c, report);
  const entry = fromLoop ?? (await storedEntry(ledger, report));
  if (entry === null)
    return { confirmed: false, why: `neither ${report.loop} nor the ledger store has an entry #${report.ledger_seq}` };
  const mismatch = reportMismatch(report, entry);
  return mismatch === null
    ? { confirmed: true, source: fromLoop ? 'loop' : 'ledger store' }
    : { confirmed: false, why: mismatch };
}

async function loopEntry(c: Client, report: PassReport): Promise<LedgerEntry | null> {
  try {
    const entries = await c.workflow.getHandle(report.loop).query(ledgerQuery);
    return entries.find((e) => e.seq === report.ledger_seq && e.workflow_id === report.loop) ?? null;
  } catch (error) {
    // Not running (or never was): the ledger store is the other source.
    log.info('a report could not be checked against its loop; the ledger store is asked', {
      loop: report.loop,
      error: String(error),
    });
    return null;
  }
}

async function storedEntry(ledger: LedgerStore | undefined, report: PassReport): Promise<LedgerEntry | null> {
  if (!ledger) return null;
  const entries = await ledger.list(report.node, { workflowId: report.loop, since: report.decided_at });
  return entries.find((e) => e.seq === report.ledger_seq && e.workflow_id === report.loop) ?? null;
}

type ForwardInput = { loop: string; resolution: Omit<LoopResolution, 'identity'>; update: UpdateRef };

/** The item's resolution to its loop's resolveWork, with the identity Temporal recorded for the item's Update. */
async function forwardResolution(
  c: Client,
  input: ForwardInput,
): Promise<{ identity: string | null; result: LoopResolutionResult }> {
  const identity = await requesterOf(c, input.update);
  try {
    const result = await c.workflow.getHandle(input.loop).executeUpdate(loopResolveWorkUpdate, {
      args: [{ ...input.resolution, identity }],
      // A retried activity sends the same Update again, which the loop does not apply twice.
      updateId: `${input.update.workflow_id}/${input.update.run_id}/${input.update.update_id}`,
    });
    return { identity, result };
  } catch (error) {
    if (error instanceof WorkflowUpdateFailedError) {
      const cause = (error.cause as { message?: string } | undefined)?.message ?? error.message;
      throw ApplicationFailure.nonRetryable(`${input.loop} refused it: ${cause}`, 'ResolutionRefused');
    }
    if (error instanceof WorkflowNotFoundError)
      throw ApplicationFailure.nonRetryable(
        withFix(
          `${input.loop} is not running`,
          'the node has a newer loop now; its next report moves the item there, then resolve again',
        ),
        'ResolutionRefused',
      );
    throw error;
  }
}

/**
 * The identity the server recorded with an accepted Update (the sending client's `identity`,
 * such as 4711@ops-laptop), read from the workflow's history. Workflow code never sees it, so the
 * workflow asks for it by an activity scheduled after it accepted the Update, when the
 * acceptance is already in the history.
 */
export async function requesterOf(client: Client, ref: UpdateRef): Promise<string | null> {
  const history = await client.workflow.getHandle(ref.workflow_id, ref.run_id).fetchHistory();
  for (const event of history.events ?? []) {
    const request = event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest;
    if (request?.meta?.updateId === ref.update_id) return request.meta.identity || null;
  }
  log.warn('the Update is not in the workflow history; its identity stays unknown', { ...ref });
  return null;
}
