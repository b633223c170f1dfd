import { allHandlersFinished, condition, continueAsNew, workflowInfo } from '@temporalio/workflow';
import {
  IDLE_WATCH,
  nextWakeMs,
  runPass,
  wakeIsResync,
  type BoundIntent,
  type Decision,
  type History,
  type WatchState,
} from '../domain';
import {
  MAX_HISTORY_EVENTS,
  WORKFLOW_PATCH,
  type PassCount,
  type ReconcileCarry,
  type ReconcileNodeInput,
  type ReconcileNodeWorkflow,
  type ReconcileResult,
  type SettledReport,
} from '../contract';
import {
  WATCH_WINDOW_MS,
  nodeAgents,
  passPorts,
  recordDecisions,
  watchEvent,
  type AgentPatches,
  type NodeAgents,
} from './agents';
import { bindAttributes, openAttributes, type AttributeWriter } from './attributes';
import { acceptRecheck, emptyInbox, handleSignals, installHandlers, type Inbox } from './handlers';
import { openIntent } from './intent';
import { endHoldAtItsTime, holdEndsAt } from './holds';
import { inForce } from './patches';
import { LEDGER_TAIL, flushLedger, openLedger, record, type LedgerState } from './ledger';
import { openReport, tellRollout } from './report-settled';
import { waitSummary } from './summaries';
import { refuseQueued } from './updates';
import { resyncAt, wakeTimer, watchIsTheWake, type WakeTimer } from './resync';
import { carryWork, openWork, reportToWork, workItemsLive, type LoopWork } from './work-loop';

/**
 * One node at one desired generation, until superseded or cancelled. Every judgement is a call
 * into src/domain; the workflow is the Temporal wiring around them: this file the loop and its
 * state, handlers.ts the signals, Updates and queries, agents.ts the node's agent and the watch,
 * ledger.ts the recording, intent.ts what the loop is bound to.
 */
export const reconcileNode: ReconcileNodeWorkflow = async (input) => {
  const loop = await openLoop(input);
  for (;;) {
    // 1. Signals first, in arrival order: each becomes one ledger entry, between passes. A hold
    //    whose time has passed ends before them.
    endHoldAtItsTime(loop);
    if (await handleSignals(loop)) return handedOver(loop);

    // 2. One pass (observe, decide, act where authorized, probe, decide), then record it.
    loop.inbox.recheckRequested = false;
    loop.passes.started++;
    watchEvent(loop, { kind: 'pass' });
    acceptRecheck(loop);
    const { final } = await runPass(
      { ...passPorts(loop), resyncAt: () => resyncAt(loop.wake, loop.watch) },
      loop.intent,
      loop.history,
    );
    loop.history = final.history;
    const seq = loop.ledger.nextSeq;
    record(loop, final.decision, 'pass');
    await recordDecisions(loop, final.decisions_to_record ?? []);
    await flushLedger(loop);
    loop.passes.done++;
    // What the pass found reaches the node's work items; only a fresh observation closes one.
    await reportToWork(loop, final.decision, seq);
    tellRollout(loop);
    if (loop.inbox.pending.length > 0 || loop.inbox.recheckRequested) continue;

    // 3. Wait for new evidence: a signal, the watch seeing a change, or the recheck trigger's time.
    await waitForEvidence(loop);

    // 4. Keep each run's history bounded: continue as new between passes, with no signal pending.
    await continueAsNewIfDue(loop);
  }
};

// ---------------------------------------------------------------------------------------------
// The loop's state: one object, carried across continue-as-new as ReconcileCarry.

interface Loop {
  readonly node: string;
  readonly workflowId: string;
  /** The first run's id: the ledger store's key for this run chain. */
  readonly chainId: string;
  readonly runs: number;
  /** Re-bound by a refreshDesired of the same generation, together with `agents`. */
  intent: BoundIntent;
  history: History;
  /** The last pass's or note's decision, written or not (a steady pass is not): it times the next pass. */
  lastDecision: Decision | null;
  readonly ledger: LedgerState;
  /** Signals and Updates waiting for the loop, and what they asked of it. */
  readonly inbox: Inbox;
  watch: WatchState;
  /** The node's agents for the bound intent. */
  agents: NodeAgents;
  readonly attributes: AttributeWriter;
  /** The node's work items this loop tells, and whether this run tells them at all. */
  readonly work: LoopWork;
  /** The patches asked as the run starts: holds taken (holds.ts), how the agent is reached (agents.ts). */
  readonly holdsLive: boolean;
  readonly agentPatches: AgentPatches;
  /** Patch keep-wake-timer: the wait keeps `wake` across passes while it serves (resync.ts). */
  readonly keepsResync: boolean;
  /** Patch watch-ends-at-resync: a watch that ends at the resync and observes there is the resync (resync.ts). */
  readonly watchResyncs: boolean;
  wake: WakeTimer | null;
  /** Passes begun and recorded, across continue-as-new (`datum reconcile --wait` counts them). */
  readonly passes: PassCount;
  /** The rollout this loop tells when it settles (report-settled.ts). */
  report: SettledReport | null;
}

async function openLoop(input: ReconcileNodeInput): Promise<Loop> {
  // Every patch a run asks at its start, before its first local activity (the registry's story).
  const workLive = workItemsLive();
  const bounded = inForce(WORKFLOW_PATCH.observationBound);
  const holdsLive = inForce(WORKFLOW_PATCH.nodeHolds);
  const agentPatches: AgentPatches = {
    bounded,
    handBack: inForce(WORKFLOW_PATCH.watchHandsBackObservation),
    probeInApply: inForce(WORKFLOW_PATCH.applyHandsBackProbe),
  };
  const keepsResync = inForce(WORKFLOW_PATCH.keepWakeTimer);
  const watchResyncs = inForce(WORKFLOW_PATCH.watchEndsAtResync) && keepsResync && agentPatches.handBack;
  const { carry, intent, history } = await openIntent(input, holdsLive);
  const ledger = openLedger(carry);
  const loop: Loop = {
    node: input.node,
    workflowId: workflowInfo().workflowId,
    chainId: workflowInfo().firstExecutionRunId,
    runs: (carry?.runs ?? 0) + 1,
    intent,
    history,
    lastDecision: carry?.last_decision ?? ledger.entries[ledger.entries.length - 1] ?? null,
    ledger,
    inbox: emptyInbox(),
    watch: IDLE_WATCH,
    agents: nodeAgents(input.node, intent, agentPatches),
    attributes: openAttributes(),
    work: openWork(workLive, carry),
    holdsLive,
    agentPatches,
    keepsResync,
    watchResyncs,
    wake: null,
    passes: { ...(carry?.passes ?? { started: 0, done: 0 }) },
    report: openReport(input.report_to, carry?.report),
  };
  installHandlers(loop);
  bindAttributes(loop.attributes, loop.node, intent);
  return loop;
}

function carryOf(loop: Loop): ReconcileCarry {
  return {
    intent: loop.intent,
    history: loop.history,
    ledger_tail: loop.ledger.entries.slice(-LEDGER_TAIL),
    next_seq: loop.ledger.nextSeq,
    last_verified_at: loop.ledger.lastVerifiedAt,
    last_fingerprint: loop.ledger.lastFingerprint,
    last_decision: loop.lastDecision,
    runs: loop.runs,
    unstored: loop.ledger.unstored,
    work: carryWork(loop.work),
    passes: loop.passes,
    report: loop.report,
  };
}

async function continueAsNewIfDue(loop: Loop): Promise<void> {
  const info = workflowInfo();
  if (!(info.continueAsNewSuggested || info.historyLength > MAX_HISTORY_EVENTS) || loop.inbox.pending.length > 0) return;
  await condition(allHandlersFinished);
  await continueAsNew<ReconcileNodeWorkflow>({ node: loop.node, generation: loop.intent.generation, carry: carryOf(loop) });
}

async function handedOver(loop: Loop): Promise<ReconcileResult> {
  refuseQueued(
    loop.inbox.pending.map((p) => p.reply),
    loop.inbox.supersededBy,
  );
  await condition(allHandlersFinished);
  return {
    node: loop.node,
    generation: loop.intent.generation,
    convergence_status: 'SUPERSEDED',
    superseded_by: loop.inbox.supersededBy ?? '',
  };
}

/**
 * Waits for a signal, the watch seeing a change, or the recheck trigger's time. A watch that ends
 * meanwhile without a change owes a restart (src/domain/watch.ts): the wait starts it, after its
 * pause if it failed, and goes on to the same wake time. A loop whose watch runs until the wake
 * waits on one timer.
 */
async function waitForEvidence(loop: Loop): Promise<void> {
  // A hold that ends by itself wakes the loop at its end, which the next iteration records.
  const wakeAt = Math.min(
    Date.now() + nextWakeMs(loop.lastDecision, loop.intent.policy, Date.now()),
    holdEndsAt(loop) ?? Infinity,
  );
  if (loop.keepsResync) return waitOnKeptTimer(loop, wakeAt);
  const evidence = () => hasEvidence(loop);
  // The time a fired timer was due: the clock reads at least that from then on (see below).
  let floor = 0;
  const now = () => Math.max(Date.now(), floor);
  for (;;) {
    watchEvent(loop, { kind: 'wait' }, now());
    const untilWake = Math.max(0, wakeAt - now());
    const restarting = loop.watch.restart_due;
    const timeout = restarting ? Math.min(untilWake, Math.max(0, loop.watch.retry_at_ms - now())) : untilWake;
    const summary = restarting
      ? `watch ${loop.node} again after a failed watch`
      : waitSummary(loop.lastDecision, loop.history, loop.intent.policy);
    const dueAt = now() + timeout;
    // Waiting for a restart's time, the wait wakes for evidence; otherwise also for a restart owed.
    const woken = await condition(() => evidence() || (!restarting && loop.watch.restart_due), timeout, { summary });
    // A timer that fired has run its time, whatever the workflow clock says. The clock can lag on
    // the first task a worker takes over from a dead one after answering a query for the loop
    // (the SDK core leaves it at the last local activity's completion time), while a replay of the
    // same task reads the task's own time: a decision taken from the lagging clock would not replay.
    if (!woken) floor = Math.max(floor, dueAt);
    if (evidence() || now() >= wakeAt) return;
  }
}

const hasEvidence = (loop: Loop) => loop.inbox.pending.length > 0 || loop.inbox.recheckRequested || loop.watch.fired;

/**
 * The same wait on the timer kept across passes (patch keep-wake-timer): neither a pass woken by
 * evidence nor a watch restarted at the end of its window cancels it while it fires at the wake
 * (keepsTimer). Only a failed watch's retry, due before it, waits on a timer of its own. Under
 * patch watch-ends-at-resync a watch that ends at the resync and observes there is the wake: the
 * loop keeps no timer while it runs, and takes one again if the watch fails or ends early.
 */
async function waitOnKeptTimer(loop: Loop, wakeAt: number): Promise<void> {
  const wake = {
    at: wakeAt,
    resync: wakeIsResync(loop.lastDecision, wakeAt, holdEndsAt(loop)),
    summary: waitSummary(loop.lastDecision, loop.history, loop.intent.policy),
  };
  let timer: WakeTimer | null = null;
  const evidence = () => hasEvidence(loop) || timer?.fired === true;
  // As in waitForEvidence: a retry timer that fired has run its time, whatever the clock says.
  let floor = 0;
  const now = () => Math.max(Date.now(), floor);
  const endsAtResync = loop.watchResyncs && wake.resync;
  for (;;) {
    const resyncIn = wake.at - now();
    const atResync = endsAtResync && resyncIn > 0 && resyncIn <= WATCH_WINDOW_MS ? { resync_at_ms: wake.at } : {};
    watchEvent(loop, { kind: 'wait', ...atResync }, now());
    // Evidence already here (the watch fired during the pass): the next pass decides the wake.
    if (evidence()) return;
    if (watchIsTheWake(loop.watch, loop.lastDecision, wake.at)) {
      // The watch ends at this wake and observes there: a timer beside it would only race it.
      if (loop.wake && !loop.wake.fired) loop.wake.cancel();
      loop.wake = timer = null;
      await condition(() => evidence() || !watchIsTheWake(loop.watch, loop.lastDecision, wake.at));
      if (evidence()) return;
      continue;
    }
    // The timer after the watch: a traced run ends at its first timer (interceptors/tracing.ts),
    // and the first pass's trace shows the watch it left running.
    timer ??= loop.wake = wakeTimer(loop.wake, loop.lastDecision, wake);
    const restarting = loop.watch.restart_due;
    if (restarting && loop.watch.retry_at_ms < timer.dueAt) {
      const retryIn = Math.max(0, loop.watch.retry_at_ms - now());
      const dueAt = now() + retryIn;
      const summary = `watch ${loop.node} again after a failed watch`;
      if (!(await condition(evidence, retryIn, { summary }))) floor = Math.max(floor, dueAt);
    } else {
      await condition(() => evidence() || (!restarting && loop.watch.restart_due));
    }
    if (evidence()) return;
  }
}
