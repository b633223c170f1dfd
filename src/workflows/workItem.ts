import {
  ApplicationFailure,
  ActivityFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  claimRefusal,
  claimWork,
  durationMs,
  isFleetReport,
  isNodeLoop,
  workEpisode,
  itemSummary,
  nextDeadline,
  openWorkItem,
  parseClaim,
  parseRelease,
  parseResolve,
  releaseRefusal,
  resolveRefusal,
  resolvedWork,
  takeReport,
  tickWork,
  unclaim,
  type CheckedResolve,
} from '../domain';
import {
  DatumStatus,
  MAX_HISTORY_EVENTS,
  MEMO_SUMMARY,
  WORKFLOW_PATCH,
  workItemId,
  claimWorkUpdate,
  releaseWorkUpdate,
  resolveWorkUpdate,
  workItemQuery,
  workReportSignal,
  type ControlActivities,
  type PassReport,
  type ResolveResult,
  type WorkItem,
  type WorkItemInput,
  type WorkItemWorkflow,
} from '../contract';
import { workReportDropped } from './metrics';
import { inForce } from './patches';
import { summaryLine } from './summaries';
import { requester, thisUpdate } from './update-identity';

/**
 * One condition episode that needs judgement, handed over as work (docs/work-items.md). The loop
 * reports each recorded pass (signal `report`); a resolver claims (Update `claim`, a lease the
 * timer ends) and resolves (Update `resolve`, forwarded to the loop's resolveWork); the item
 * closes when a fresh observation shows the condition gone, and reopens when one after a
 * resolution still shows it. Every judgement is src/domain/work-items.ts (and work-reports.ts);
 * this is the wiring.
 */
export const workItem: WorkItemWorkflow = async (input) => {
  const w = openItem(input);
  if (w.confirming && !w.carried && !(await confirmed(w, input.report))) return closeUnconfirmed(w);
  for (;;) {
    await waitForWork(w);
    await takeReports(w);
    w.item = tickWork(w.item, nowIso(), w.escalateMs);
    publish(w);
    if (w.item.state === 'CLOSED') break;
    await continueAsNewIfDue(w, input);
  }
  await condition(allHandlersFinished);
  return w.item;
};

interface Work {
  item: WorkItem;
  reports: PassReport[];
  /** A resolution is being carried to the loop: reports wait, so none is judged against half a resolution. */
  resolving: boolean;
  escalateMs: number;
  /** The state and summary last published (search attribute, memo). */
  shown: { state: string | null; summary: string | null };
  /** The work-item-confirms-reports patch is in force for this run: reports are confirmed, resolutions bound to their episode. */
  confirming: boolean;
  /** The first run of this chain: what an episode's run_id is. */
  runId: string;
  /** The item came from this item's own continue-as-new (its opening report was confirmed by an earlier run). */
  carried: boolean;
}

/**
 * The item this run holds: carried from its own continue-as-new, else opened from its first
 * report. An item is one node's, one condition's, one resource's: a workflow started under
 * another id than those name is refused, and a carry it did not continue from itself is never
 * taken (a forged carry would show a resolution nobody gave, and never escalate or close).
 */
function openItem(input: WorkItemInput): Work {
  // Asked first, before any command of the run (the registry's story for work-items).
  const confirming = inForce(WORKFLOW_PATCH.workItemConfirmsReports);
  const info = workflowInfo();
  if (confirming && info.workflowId !== workItemId(input.node, input.condition, input.resource_key))
    throw ApplicationFailure.nonRetryable(
      `${info.workflowId} is not the work item of ${input.node}/${input.condition}${input.resource_key ? `/${input.resource_key}` : ''}; only its loop opens a work item`,
      'InvalidWorkflowInput',
    );
  const carry = confirming ? ownCarry(input, info) : (input.carry ?? null);
  const item = carry ?? openWorkItem(info.workflowId, input, nowIso());
  const w: Work = {
    item,
    reports: [],
    resolving: false,
    escalateMs: durationMs(input.escalate_after),
    shown: { state: carry ? null : 'OPEN', summary: null },
    confirming,
    runId: info.firstExecutionRunId,
    carried: carry !== null,
  };
  installHandlers(w);
  publish(w);
  return w;
}

/** The carry, when this run continued from the item's own run with it (the server sets continuedFromExecutionRunId for that only) and it is this item's. */
function ownCarry(input: WorkItemInput, info: ReturnType<typeof workflowInfo>): WorkItem | null {
  const carry = input.carry;
  if (!carry) return null;
  const own =
    info.continuedFromExecutionRunId !== undefined &&
    carry.id === info.workflowId &&
    carry.node === input.node &&
    carry.condition === input.condition &&
    carry.resource_key === input.resource_key;
  if (!own) log.warn('work item refused a carry it did not continue from itself', { id: info.workflowId });
  return own ? carry : null;
}

/**
 * Whether the report is what its loop recorded (confirmReport): the loop is the node's reconcile
 * workflow, and its entry at that seq (or the ledger store's) says the same. Anything else is
 * dropped, logged and counted (the item's dropped_reports, datum_work_reports_dropped_total).
 */
async function confirmed(w: Work, report: PassReport): Promise<boolean> {
  let why: string;
  // A fleet condition's item takes its reports from the fleet workflow, which confirmReport asks in turn.
  if (!(isNodeLoop(report) || isFleetReport(report)) || report.node !== w.item.node)
    why = `${report.loop} is not the reconcile loop of ${w.item.node}, nor the fleet workflow`;
  else {
    const check = await work.confirmReport.executeWithOptions(
      { summary: summaryLine(`confirm ${report.loop} #${report.ledger_seq}`) },
      [report],
    );
    if (check.confirmed) return true;
    why = check.why;
  }
  w.item = { ...w.item, dropped_reports: (w.item.dropped_reports ?? 0) + 1 };
  log.warn('work item dropped a report its loop did not confirm', {
    id: w.item.id,
    loop: report.loop,
    seq: report.ledger_seq,
    why,
  });
  workReportDropped(w.item.condition);
  return false;
}

/** An item whose opening report its loop did not confirm was never opened by its loop: it ends at once, saying so. */
async function closeUnconfirmed(w: Work): Promise<WorkItem> {
  const at = nowIso();
  w.item = {
    ...w.item,
    state: 'CLOSED',
    closed: {
      at,
      ledger_seq: -1,
      detail: `Its opening report was not confirmed by ${w.item.loop} (nor the ledger store): no loop opened it.`,
    },
  };
  publish(w);
  await condition(allHandlersFinished);
  return w.item;
}

/**
 * Until a report (not while a resolution is on its way), the next lease end or escalation, or a
 * change of when that is (a claim taken or released meanwhile).
 */
async function waitForWork(w: Work): Promise<void> {
  const deadline = nextDeadline(w.item, w.escalateMs);
  const ready = () => (w.reports.length > 0 && !w.resolving) || nextDeadline(w.item, w.escalateMs) !== deadline;
  if (deadline === null) return void (await condition(ready));
  const summary = w.item.claim ? `claim by ${w.item.claim.by} ends` : 'escalate if still unclaimed';
  await condition(ready, Math.max(0, Date.parse(deadline) - Date.now()), { summary: summaryLine(summary) });
}

async function takeReports(w: Work): Promise<void> {
  if (w.resolving) return;
  for (let report = w.reports.shift(); report; report = w.reports.shift()) {
    if (w.confirming && !(await confirmed(w, report))) continue;
    // A resolution that started while this report was confirmed is judged with it: the report waits.
    if (w.resolving) {
      w.reports.unshift(report);
      return;
    }
    const { item, change } = takeReport(w.item, report, nowIso());
    w.item = item;
    if (change === 'reopened' || change === 'closed')
      log.info(`work item ${change}`, { id: item.id, ledger_seq: report.ledger_seq, status: report.status });
  }
}

async function continueAsNewIfDue(w: Work, input: WorkItemInput): Promise<void> {
  const info = workflowInfo();
  if (!(info.continueAsNewSuggested || info.historyLength > MAX_HISTORY_EVENTS) || w.resolving || w.reports.length > 0) return;
  await condition(allHandlersFinished);
  await continueAsNew<WorkItemWorkflow>({ ...input, carry: w.item });
}

// ---------------------------------------------------------------------------------------------
// Handlers. A report only queues; the Updates judge in their validators (a refused one records
// nothing) and change the item in their handlers' first, synchronous step, so of two resolvers
// racing the second one's validator already sees the first one's claim.

function installHandlers(w: Work): void {
  setHandler(workReportSignal, (report) => {
    // Outside input never fails the item: a report that is not about this node is dropped.
    if (!report || typeof report !== 'object' || report.node !== w.item.node || !Array.isArray(report.conditions)) {
      log.warn('work item dropped a report that is not about its node', { id: w.item.id });
      return;
    }
    w.reports.push(report);
  });
  setHandler(workItemQuery, () => w.item);
  setHandler(claimWorkUpdate, (payload) => claim(w, payload), { validator: (payload) => validateClaim(w, payload) });
  setHandler(releaseWorkUpdate, (payload) => release(w, payload), {
    validator: (payload) => {
      const parsed = parseRelease(payload);
      if (!parsed.ok) throw new Error(parsed.error);
      refuseIf(releaseRefusal(w.item, parsed.value.by, nowIso()));
    },
  });
  setHandler(resolveWorkUpdate, (payload) => resolve(w, payload), { validator: (payload) => validateResolve(w, payload) });
}

const refuseIf = (reason: string | null) => {
  if (reason) throw new Error(reason);
};

function validateClaim(w: Work, payload: unknown): void {
  const parsed = parseClaim(payload);
  if (!parsed.ok) throw new Error(parsed.error);
  refuseIf(w.resolving ? 'claim refused: a resolution is being recorded right now' : null);
  refuseIf(claimRefusal(w.item, parsed.value.by, nowIso()));
}

async function claim(w: Work, payload: unknown): Promise<WorkItem> {
  const parsed = parseClaim(payload);
  if (!parsed.ok) throw ApplicationFailure.nonRetryable(parsed.error, 'InvalidPayload');
  const at = nowIso();
  w.item = claimWork(w.item, parsed.value, null, at, episodeOf(w));
  publish(w);
  const identity = await requester(thisUpdate());
  // The same claim still holds (not released or expired meanwhile): it records who sent it.
  if (w.item.claim?.at === at && w.item.claim.by === parsed.value.by)
    w.item = { ...w.item, claim: { ...w.item.claim, identity } };
  return w.item;
}

function release(w: Work, payload: unknown): WorkItem {
  const parsed = parseRelease(payload);
  if (parsed.ok && w.item.claim?.by === parsed.value.by) w.item = unclaim(w.item);
  publish(w);
  return w.item;
}

function validateResolve(w: Work, payload: unknown): void {
  const parsed = parseResolve(payload);
  if (!parsed.ok) throw new Error(parsed.error);
  refuseIf(w.resolving ? 'resolve refused: another resolution is being recorded right now' : null);
  refuseIf(resolveRefusal(w.item, parsed.value, nowIso(), episodeOf(w)));
}

/** The episode a resolution must be judged on now; null in a run from before episodes were kept. */
const episodeOf = (w: Work) => (w.confirming ? workEpisode(w.item, w.runId) : null);

/**
 * Carries the resolution to the loop, which records it (with the identity Temporal recorded for
 * this Update) and passes again at once. The loop may still refuse it (its history changed
 * since the item's last report): then the item is as it was, and the caller is told why.
 */
async function resolve(w: Work, payload: unknown): Promise<ResolveResult> {
  const parsed = parseResolve(payload);
  if (!parsed.ok) throw ApplicationFailure.nonRetryable(parsed.error, 'InvalidPayload');
  const r: CheckedResolve = parsed.value;
  const before = w.item;
  w.resolving = true;
  w.item = claimWork(w.item, { by: r.by, lease_ms: FORWARD_TIMEOUT_MS }, before.claim?.identity ?? null, nowIso(), episodeOf(w));
  try {
    const { identity, result } = await work.forwardResolution.executeWithOptions(
      { summary: summaryLine(`${r.resolution} by ${r.by} → ${before.loop}`) },
      [{ loop: before.loop, resolution: loopResolution(before, r), update: thisUpdate() }],
    );
    w.item = resolvedWork(w.item, r, identity, { seq: result.seq, loop: before.loop }, nowIso());
    return { item: w.item, entry: result.entry };
  } catch (error) {
    w.item = before;
    const cause = error instanceof ActivityFailure && error.cause ? error.cause.message : String(error);
    throw ApplicationFailure.nonRetryable(`resolve refused: ${cause}`, 'ResolutionRefused');
  } finally {
    w.resolving = false;
    publish(w);
  }
}

function loopResolution(item: WorkItem, r: CheckedResolve) {
  return {
    item_id: item.id,
    // This workflow holds only the items loops open (its input's condition).
    condition: item.condition as WorkItemInput['condition'],
    resource_key: item.resource_key,
    resolution: r.resolution,
    attempts: r.attempts,
    by: r.by,
    note: r.note,
    ...(r.operator ? { operator: r.operator } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// Activities, and what the Web UI shows.

/** The loop records a resolution between passes: a pass with an apply may take minutes. */
const FORWARD_TIMEOUT_MS = 15 * 60_000;

const work = proxyActivities<ControlActivities>({
  startToCloseTimeout: FORWARD_TIMEOUT_MS,
  retry: { initialInterval: '1s', maximumInterval: '30s', maximumAttempts: 5, nonRetryableErrorTypes: ['ResolutionRefused'] },
});

/** State as a search attribute, the one-line summary as the memo, the item as the page's details; only what changed. */
function publish(w: Work): void {
  const episode = episodeOf(w);
  if (episode) w.item = { ...w.item, episode };
  const summary = itemSummary(w.item);
  if (w.shown.state !== w.item.state) {
    upsertSearchAttributes([{ key: DatumStatus, value: w.item.state }]);
    w.shown.state = w.item.state;
  }
  if (w.shown.summary !== summary) {
    upsertMemo({ [MEMO_SUMMARY]: summary });
    w.shown.summary = summary;
  }
  setCurrentDetails(details(w.item));
}

function details(item: WorkItem): string {
  const choices = item.allowed.map((a) => `- **${a.resolution}**: ${a.does}${a.refused ? ` _Refused here: ${a.refused}_` : ''}`);
  const claim = item.claim
    ? `claimed by ${item.claim.by}${item.claim.identity ? ` (${item.claim.identity})` : ''} until ${item.claim.until}`
    : 'unclaimed';
  return [
    `**${item.state}** ${item.condition}${item.resource_key ? ` on \`${item.resource_key}\`` : ''} of **${item.node}** (${claim})`,
    '',
    item.message,
    '',
    `Resolver: ${item.resolver}. Loop: \`${item.loop}\` at generation ${item.target.generation}.`,
    '',
    ...choices,
    '',
    `\`datum work show ${item.id}\` · \`datum work resolve ${item.id} --resolution R --by NAME\``,
  ].join('\n');
}

const nowIso = () => new Date(Date.now()).toISOString();
