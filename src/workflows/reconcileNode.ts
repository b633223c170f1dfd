import {
  ActivityFailure,
  ApplicationFailure,
  ParentClosePolicy,
  TimeoutFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  log,
  proxyActivities,
  type ActivityInterfaceFor,
  proxyLocalActivities,
  setHandler,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { TimeoutType, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  LEDGER_VERSION,
  agentResources,
  desiredDigest,
  decisionRequest,
  durationMs,
  emptyHistory,
  judgeRefresh,
  ledgerView,
  mayWatch,
  nextWakeMs,
  noteDecision,
  parseSignal,
  recordResolution,
  recordSignal,
  runPass,
  shouldWrite,
  verifiedAt,
  watchRetryAtMs,
  watchRetrySoonAtMs,
  watchWanted,
  type ApplyFailure,
  type AuthorityView,
  type AuthorizedAction,
  type BoundIntent,
  type Decision,
  type ExecutionEvidence,
  type History,
  type LedgerEntry,
  type PassPorts,
  type RecordDecisionRequest,
  type RecordKind,
  type Observation,
  type Snapshot,
  type WatchState,
  nodeId,
} from '../domain';
import { echo } from '../domain/bounds';
import {
  CONTROL_PERMANENT_ERRORS,
  CONTROL_TASK_QUEUE,
  LEDGER_PERMANENT_ERRORS,
  MAX_HISTORY_EVENTS,
  REFUSALS,
  WATCH_RULE,
  WORKFLOW_PATCH,
  WORKFLOW_TYPES,
  agentTaskQueue,
  outcomeOfFailure,
  ledgerQuery,
  recheckSignal,
  reconcileWorkflowId,
  refreshDesiredSignal,
  refreshDesiredUpdate,
  resolveConflictSignal,
  resolveConflictUpdate,
  stateQuery,
  withFix,
  type AgentActivities,
  type WatchRequest,
  type AuthorityRead,
  type ControlActivities,
  type NodeState,
  type ReconcileCarry,
  type ReconcileNodeInput,
  type ReconcileNodeWorkflow,
  type ReconcileResult,
} from '../contract';
import {
  bindAttributes,
  handOverAttributes,
  openAttributes,
  publishDecision,
  publishVerified,
  rebindAttributes,
  showInvalidAtStart,
  type AttributeWriter,
} from './attributes';
import { decisionRecorded, ledgerBacklog, passJudged } from './metrics';
import { summaryLine, waitSummary } from './summaries';
import { inForce } from './patches';
import { awaitReply, checkNotHandedOver, checkPayload, refuseQueued, replyOf, type Reply } from './updates';

/**
 * One node at one desired generation, until superseded or cancelled. Every judgement is a call
 * into src/domain; this file is the Temporal wiring around them: timers, signals, queries,
 * activities and continue-as-new.
 */
export const reconcileNode: ReconcileNodeWorkflow = async (input) => {
  const loop = await openLoop(input);
  for (;;) {
    // 1. Signals first, in arrival order: each becomes one ledger entry, between passes.
    if (await handleSignals(loop)) return handedOver(loop);

    // 2. One pass (observe, decide, act where authorized, probe, decide), then record it.
    loop.recheckRequested = false;
    loop.watchFired = false;
    acceptRecheck(loop);
    const { final } = await runPass(passPorts(loop), loop.intent, loop.history);
    loop.history = final.history;
    record(loop, final.decision, 'pass');
    await recordDecisions(loop, final.decisions_to_record ?? []);
    await flushLedger(loop);
    if (loop.pending.length > 0 || loop.recheckRequested) continue;

    // 3. Wait for new evidence: a signal, the watch seeing a change, or the recheck trigger's time.
    await waitForEvidence(loop);

    // 4. Keep each run's history bounded: continue as new between passes, with no signal pending.
    await continueAsNewIfDue(loop);
  }
};

// ---------------------------------------------------------------------------------------------
// The loop's state: one object, carried across continue-as-new as ReconcileCarry.

/**
 * A signal waiting for the loop; a recheck with a bad payload waits as its rejection. An Update
 * of the same name waits here too, with the reply its handler is waiting for.
 */
type Pending =
  | { signal: typeof refreshDesiredSignal; payload: unknown; reply?: Reply }
  | { signal: typeof resolveConflictSignal; payload: unknown; reply?: Reply }
  | { signal: typeof recheckSignal; rejected: string; reply?: undefined };

interface Loop {
  readonly node: string;
  readonly workflowId: string;
  /** The first run's id: the ledger store's key for this run chain. */
  readonly chainId: string;
  readonly runs: number;
  intent: BoundIntent;
  history: History;
  /** Recorded entries kept in the workflow (the store keeps all). */
  ledger: LedgerEntry[];
  nextSeq: number;
  lastVerifiedAt: string | null;
  lastFingerprint: string | null;
  /** The last pass's or note's decision, written or not (a steady pass is not): it times the next pass. */
  lastDecision: Decision | null;
  /** Entries the ledger store has not confirmed yet, oldest first. */
  unstored: LedgerEntry[];
  supersededBy: string | null;
  pending: Pending[];
  recheckRequested: boolean;
  /** A valid recheck arrived since the last pass: it clears an earlier rejected one. */
  recheckAccepted: boolean;
  watch: WatchState;
  watchFired: boolean;
  /** The change markers of the last observation, the next watch's baseline (null: none to give). */
  observedMarkers: Record<string, string | null> | null;
  /** False right after a watch reported a change against its baseline: the next one goes without. */
  baselineTrusted: boolean;
  /** A watch ended without a change under WATCH_RULE.failureRetriesSoon: the wait starts the next one (after its pause, if it failed). */
  watchRetry: boolean;
  agents: NodeAgents;
  attributes: AttributeWriter;
}

/** Ledger entries kept in the workflow and carried across continue-as-new (the store keeps all). */
const LEDGER_TAIL = 50;

async function openLoop(input: ReconcileNodeInput): Promise<Loop> {
  checkInput(input);
  const carry = trustedCarry(input);
  const opening = carry ? null : openingPatches();
  const intent = carry ? carry.intent : bindAtStart(await readValidAuthority(input, opening!), input);
  const history = carry?.history ?? (await freshHistory(input.node, opening!));
  const ledger = carry?.ledger_tail ?? [];
  const loop: Loop = {
    node: input.node,
    workflowId: workflowInfo().workflowId,
    chainId: workflowInfo().firstExecutionRunId,
    runs: (carry?.runs ?? 0) + 1,
    intent,
    history,
    ledger,
    nextSeq: carry?.next_seq ?? 1,
    lastVerifiedAt: carry?.last_verified_at ?? null,
    lastFingerprint: carry?.last_fingerprint ?? null,
    lastDecision: carry?.last_decision ?? ledger[ledger.length - 1] ?? null,
    unstored: carry?.unstored ?? [],
    supersededBy: null,
    pending: [],
    recheckRequested: false,
    recheckAccepted: false,
    watch: { running: false, retry_at_ms: 0 },
    watchFired: false,
    observedMarkers: null,
    baselineTrusted: true,
    watchRetry: false,
    agents: nodeAgents(input.node, intent),
    attributes: openAttributes(),
  };
  installHandlers(loop);
  bindAttributes(loop.attributes, loop.node, intent);
  return loop;
}

/**
 * The patches a new run chain's opening depends on, asked before its first local activity (see
 * the registry for why); runs recorded before asked each where it is used.
 */
interface OpeningPatches {
  storedDecisions(): boolean;
  waitForValid(): boolean;
}

function openingPatches(): OpeningPatches {
  if (inForce(WORKFLOW_PATCH.openingPatchesFirst)) return { storedDecisions: () => true, waitForValid: () => true };
  return {
    storedDecisions: () => inForce(WORKFLOW_PATCH.storedOperatorDecisions),
    waitForValid: () => inForce(WORKFLOW_PATCH.waitForValidDesiredState),
  };
}

/**
 * A new run chain starts from the operator decisions (yields, open conflicts) the ledger store
 * kept for the node, so they hold even when the node lost its own record under .datum/. A store
 * that cannot answer leaves the agent's record as the only one.
 */
async function freshHistory(node: string, opening: OpeningPatches): Promise<History> {
  if (!opening.storedDecisions()) return emptyHistory();
  try {
    const stored_decisions = await control.storedDecisions.executeWithOptions(
      { summary: summaryLine(`stored operator decisions ${node}`) },
      [node],
    );
    return { ...emptyHistory(), stored_decisions };
  } catch (error) {
    log.warn('the ledger store did not answer for stored operator decisions; the agent keeps its own', {
      node,
      error: String(error),
    });
    return emptyHistory();
  }
}

function carryOf(loop: Loop): ReconcileCarry {
  return {
    intent: loop.intent,
    history: loop.history,
    ledger_tail: loop.ledger.slice(-LEDGER_TAIL),
    next_seq: loop.nextSeq,
    last_verified_at: loop.lastVerifiedAt,
    last_fingerprint: loop.lastFingerprint,
    last_decision: loop.lastDecision,
    runs: loop.runs,
    unstored: loop.unstored,
  };
}

async function continueAsNewIfDue(loop: Loop): Promise<void> {
  const info = workflowInfo();
  if (!(info.continueAsNewSuggested || info.historyLength > MAX_HISTORY_EVENTS) || loop.pending.length > 0) return;
  await condition(allHandlersFinished);
  await continueAsNew<ReconcileNodeWorkflow>({ node: loop.node, generation: loop.intent.generation, carry: carryOf(loop) });
}

async function handedOver(loop: Loop): Promise<ReconcileResult> {
  refuseQueued(
    loop.pending.map((p) => p.reply),
    loop.supersededBy,
  );
  await condition(allHandlersFinished);
  return {
    node: loop.node,
    generation: loop.intent.generation,
    convergence_status: 'SUPERSEDED',
    superseded_by: loop.supersededBy ?? '',
  };
}

// ---------------------------------------------------------------------------------------------
// Signals and queries. Handlers only queue: the loop handles signals in order, at a point where
// no pass is half done.

function installHandlers(loop: Loop): void {
  setHandler(refreshDesiredSignal, (payload) => void loop.pending.push({ signal: refreshDesiredSignal, payload }));
  setHandler(resolveConflictSignal, (payload) => void loop.pending.push({ signal: resolveConflictSignal, payload }));
  setHandler(recheckSignal, (payload) => {
    const parsed = parseSignal(recheckSignal.name, payload);
    if (parsed.ok) {
      loop.recheckRequested = true;
      loop.recheckAccepted = true;
    } else loop.pending.push({ signal: recheckSignal, rejected: parsed.error });
  });
  setHandler(ledgerQuery, () => loop.ledger);
  setHandler(stateQuery, () => stateOf(loop));
  // The Updates queue like their signals; the handler returns once the loop recorded the decision.
  const queue = (pending: Pending & { reply: Reply }) => (loop.pending.push(pending), awaitReply(pending.reply));
  setHandler(refreshDesiredUpdate, (payload) => queue({ signal: refreshDesiredSignal, payload, reply: {} }), {
    validator: (payload) => {
      checkNotHandedOver(loop.supersededBy);
      checkPayload(refreshDesiredSignal.name, payload);
    },
  });
  setHandler(resolveConflictUpdate, (payload) => queue({ signal: resolveConflictSignal, payload, reply: {} }), {
    validator: (payload) => validateResolution(loop, payload),
  });
}

/** An Update's validator: the payload, and a resolution the history can take now (an open conflict on that key). */
function validateResolution(loop: Loop, payload: unknown): void {
  checkNotHandedOver(loop.supersededBy);
  const parsed = parseSignal(resolveConflictSignal.name, payload);
  if (!parsed.ok) throw new Error(parsed.error);
  const resolved = recordResolution(loop.history, parsed.value, nowIso());
  if (resolved.error) throw new Error(`resolveConflict rejected: ${resolved.error}`);
}

function stateOf(loop: Loop): NodeState {
  const last = loop.lastDecision;
  return {
    node: loop.node,
    workflow_id: loop.workflowId,
    convergence_status: last?.convergence_status ?? null,
    reason: last?.reason ?? null,
    reason_detail: last?.reason_detail ?? null,
    recheck_trigger: last?.recheck_trigger ?? null,
    conditions: loop.history.conditions,
    attempt_count: loop.history.attempt_count,
    retry_budget: loop.intent.policy.retry_budget,
    desired_generation: loop.intent.generation,
    desired_digest: loop.intent.digest,
    mode: last?.mode ?? null,
    last_verified_at: loop.lastVerifiedAt,
    ledger_entries: loop.nextSeq - 1,
    superseded_by: loop.supersededBy,
  };
}

/** Handles the queued signals in order; true when this loop has handed over and must end. */
async function handleSignals(loop: Loop): Promise<boolean> {
  for (let next = loop.pending.shift(); next; next = loop.pending.shift()) {
    const fromSeq = loop.nextSeq;
    const done = await handleSignal(loop, next);
    await flushLedger(loop);
    if (next.reply) next.reply.result = replyOf(loop.ledger, fromSeq, loop.lastDecision!, loop.supersededBy);
    if (done) return true;
  }
  return false;
}

async function handleSignal(loop: Loop, pending: Pending): Promise<boolean> {
  if ('rejected' in pending) {
    rejectSignal(loop, recheckSignal.name, pending.rejected, pending.rejected);
    return false;
  }
  if (pending.signal === resolveConflictSignal) {
    await resolveConflict(loop, pending.payload);
    return false;
  }
  return refreshDesired(loop, pending.payload);
}

/**
 * A valid recheck closes the INVALID_SIGNAL an earlier malformed one raised, as a valid signal of
 * any other name does. Recorded by the loop, not the handler, so a pass in flight cannot undo it.
 */
function acceptRecheck(loop: Loop): void {
  if (!loop.recheckAccepted) return;
  loop.recheckAccepted = false;
  if (loop.history.rejected_signals[recheckSignal.name] && inForce(WORKFLOW_PATCH.validRecheckClearsRejection)) {
    loop.history = recordSignal(loop.history, recheckSignal.name, null);
  }
}

/** A malformed or refused signal is recorded, raises INVALID_SIGNAL, and the loop goes on. */
function rejectSignal(loop: Loop, name: Parameters<typeof recordSignal>[1], error: string, detail: string): void {
  loop.history = recordSignal(loop.history, name, { error, at: nowIso() });
  note(loop, { reason: 'SIGNAL_REJECTED', detail });
}

async function resolveConflict(loop: Loop, payload: unknown): Promise<void> {
  const name = resolveConflictSignal.name;
  const parsed = parseSignal(name, payload);
  if (!parsed.ok) return rejectSignal(loop, name, parsed.error, parsed.error);
  const v = parsed.value;
  const resolved = recordResolution(recordSignal(loop.history, name, null), v, nowIso());
  if (resolved.error) {
    return rejectSignal(
      loop,
      name,
      `resolveConflict rejected: ${resolved.error}`,
      `resolveConflict for "${v.resource_key}" by ${v.by} rejected: ${resolved.error}.`,
    );
  }
  loop.history = resolved.history;
  // The agent keeps the yield (or ends the conflict on a retake) before the pass that follows acts.
  const kept = decisionRequest(loop.intent, v.resource_key, { kind: v.resolution, by: v.by, at: nowIso(), note: v.note ?? null });
  if (kept) await recordDecisions(loop, [kept]);
  note(loop, {
    reason: 'OPERATOR_RESOLUTION_RECORDED',
    detail: `${v.by} resolved the conflict on "${v.resource_key}" by ${v.resolution}${v.note ? ` (${v.note})` : ''}; it closes when a fresh observation confirms it.`,
    trigger: PASS_FOLLOWS_NOW,
    // On the note, so the ledger store's copy of the decision changes with the agent's, not at
    // the next pass entry (which may never come before a hand-over). Only a new field of the
    // entry the local activity already receives: no new command, so no patch.
    resolution: kept && { ...kept, kind: v.resolution },
  });
  loop.recheckRequested = true;
}

const PASS_FOLLOWS_NOW = { trigger: 'FRESH_OBSERVATION', not_before: null, detail: 'the pass that follows now' } as const;

/** refreshDesired: the same generation re-binds, a newer one hands over, anything else is refused. */
async function refreshDesired(loop: Loop, payload: unknown): Promise<boolean> {
  const name = refreshDesiredSignal.name;
  const parsed = parseSignal(name, payload);
  if (!parsed.ok) {
    rejectSignal(loop, name, parsed.error, parsed.error);
    return false;
  }
  loop.history = recordSignal(loop.history, name, null);
  const read = await readAuthority(loop.node);
  const verdict = judgeRefresh(loop.intent, parsed.value, authorityView(read));
  if (verdict.verdict === 'refuse') {
    note(loop, { reason: 'REFRESH_REFUSED', detail: verdict.detail });
    return false;
  }
  if (verdict.verdict === 'rebind') {
    if (!read.ok) throw new Error('unreachable: judgeRefresh re-binds only to an authority it could read');
    loop.intent = read.intent;
    loop.agents = nodeAgents(loop.node, read.intent);
    rebindAttributes(loop.attributes, read.intent);
    note(loop, { reason: 'REBOUND', detail: verdict.detail, trigger: PASS_FOLLOWS_NOW });
    loop.recheckRequested = true;
    return false;
  }
  const successor = await startSuccessor(loop.node, parsed.value);
  loop.supersededBy = successor;
  note(loop, {
    status: 'SUPERSEDED',
    reason: 'NEWER_GENERATION',
    detail: verdict.detail.replace('datum/<node>/', `datum/${loop.node}/`),
    trigger: { trigger: 'NONE', not_before: null, detail: `${successor} owns the node now` },
  });
  return true;
}

/** Starts the newer generation's loop, or attaches to it when a rollout started it first. */
async function startSuccessor(node: string, target: { generation: number; digest: string }): Promise<string> {
  const workflowId = reconcileWorkflowId(node, target.generation);
  try {
    await startChild<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      workflowId,
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ node, generation: target.generation }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: handOverAttributes(node, target),
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
  return workflowId;
}

/**
 * Operator decisions kept on the node (docs/architecture.md §4 "Targets and operator decisions"):
 * the agent refuses to overwrite a yielded or contested target, and the next generation starts
 * from them. A node that cannot take one now is told again after the next pass (decide lists
 * what it lacks).
 */
async function recordDecisions(loop: Loop, requests: RecordDecisionRequest[]): Promise<void> {
  if (requests.length === 0 || !inForce(WORKFLOW_PATCH.durableOperatorDecisions)) return;
  for (const request of requests) {
    try {
      await loop.agents.observer.recordDecision.executeWithOptions(
        { summary: summaryLine(`record decision on ${loop.node}: ${request.kind} ${request.resource_key}`) },
        [request],
      );
    } catch (error) {
      log.warn('the agent did not keep an operator decision; the next pass sends it again', {
        resource_key: request.resource_key,
        kind: request.kind,
        error: describeFailure(error, loop.agents.nodeTimeout),
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Recording: the ledger (in the workflow, then the fleet-wide store), metrics, search attributes.

function note(loop: Loop, n: Parameters<typeof noteDecision>[3]): void {
  const r = noteDecision(loop.intent, loop.lastDecision, loop.history, n, nowIso());
  loop.history = r.history;
  record(loop, r.decision, 'note');
}

function record(loop: Loop, decision: Decision, kind: RecordKind): void {
  const now = nowIso();
  // Before the loop remembers it: the latencies compare it with the decisions before.
  if (kind === 'pass') passJudged(decision, now, loop);
  loop.lastVerifiedAt = verifiedAt(decision, now, loop.lastVerifiedAt);
  loop.lastDecision = decision;
  const { write, fingerprint } = shouldWrite(decision, kind, loop.lastFingerprint);
  if (!write) return publishVerified(loop.attributes, loop.lastVerifiedAt);
  loop.lastFingerprint = fingerprint;
  const entry: LedgerEntry = {
    // File contents stay out of the ledger: it keeps their digest and size (src/domain/redact.ts).
    ...ledgerView(decision, loop.intent),
    ledger_version: LEDGER_VERSION,
    seq: loop.nextSeq++,
    decided_at: now,
    workflow_id: loop.workflowId,
  };
  loop.ledger.push(entry);
  loop.unstored.push(entry);
  if (loop.ledger.length > LEDGER_TAIL * 2) loop.ledger = loop.ledger.slice(-LEDGER_TAIL);
  decisionRecorded(decision);
  publishDecision(loop.attributes, decision, loop.lastVerifiedAt);
}

/**
 * Appends recorded entries to the fleet-wide store, oldest first. An entry the store could not
 * take stays queued (and is carried across continue-as-new): the loop never stops for the
 * store, and nothing recorded is dropped.
 */
async function flushLedger(loop: Loop): Promise<void> {
  await flushEntries(loop);
  ledgerBacklog(loop.unstored.length);
}

async function flushEntries(loop: Loop): Promise<void> {
  for (let entry = loop.unstored[0]; entry; entry = loop.unstored[0]) {
    try {
      await store.appendLedger.executeWithOptions({ summary: summaryLine(`append ledger ${loop.node} #${entry.seq}`) }, [
        { entry, chain_id: loop.chainId },
      ]);
      loop.unstored.shift();
    } catch (error) {
      if (isSeqConflict(error) && inForce(WORKFLOW_PATCH.ledgerSeqConflictMovesOn)) {
        // The store holds another decision under this seq for good (retrying cannot change it):
        // its record stands, and this one must not hold back every later entry of the chain.
        log.error('ledger store holds a different entry under this seq; the later entries go on', {
          seq: entry.seq,
          error: String(error),
        });
        loop.unstored.shift();
        continue;
      }
      // The backlog is what an operator watches: entries decided and not yet in the fleet-wide store.
      log.warn('ledger store did not take an entry; it stays queued', {
        seq: entry.seq,
        backlog: loop.unstored.length,
        error: String(error),
      });
      return;
    }
  }
}

function isSeqConflict(error: unknown): boolean {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return cause instanceof ApplicationFailure && cause.type === 'LedgerSeqConflict';
}

// ---------------------------------------------------------------------------------------------
// The world: the authority, the node's agent, and its watch.

const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', maximumAttempts: 5, nonRetryableErrorTypes: [...CONTROL_PERMANENT_ERRORS] },
});

/** The desired-state authority's current view of the node, read on the controller. */
function readAuthority(node: string): Promise<AuthorityRead> {
  return control.readAuthority.executeWithOptions({ summary: summaryLine(`read authority ${node}`) }, [node]);
}

const store = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: {
    initialInterval: '1s',
    maximumInterval: '10s',
    maximumAttempts: 5,
    nonRetryableErrorTypes: [...LEDGER_PERMANENT_ERRORS],
  },
});

/** An apply may fetch and unpack a release or wait for a service to become healthy. */
const APPLY_TIMEOUT = '10m';
/**
 * An observation reads files and /proc and probes health with short timeouts: seconds. Past this
 * the task is taken as lost (an agent that died holding it, a poll answered after the agent
 * stopped waiting for it) and retried, instead of holding the loop for an apply's ten minutes.
 */
const OBSERVE_TIMEOUT = '1m';
/** How long one watch runs before it returns "nothing changed" and the loop starts another. */
const WATCH_WINDOW_MS = 10 * 60_000;

interface NodeAgents {
  agent: ActivityInterfaceFor<AgentActivities>;
  observer: ActivityInterfaceFor<AgentActivities>;
  watcher: ActivityInterfaceFor<AgentActivities>;
  nodeTimeout: string;
  /** What the agents are asked about: the bound intent's resources, artifacts where the controller resolved them. */
  resources: BoundIntent['resources'];
}

/**
 * The node's agent for one bound intent. scheduleToStartTimeout is node_timeout: an agent that does
 * not pick the task up by then is unreachable, which is a decision (NODE_UNREACHABLE), not a hang.
 * The agent heartbeats every 5 s while it works: a silent task is lost, and is retried. The watch
 * is long-lived and never retried by Temporal; the loop decides when to start the next one.
 */
function nodeAgents(node: string, intent: BoundIntent): NodeAgents {
  const nodeTimeout = intent.policy.node_timeout;
  const base = {
    taskQueue: agentTaskQueue(node),
    scheduleToStartTimeout: durationMs(nodeTimeout),
    heartbeatTimeout: '30s',
  } as const;
  const retry = { initialInterval: '1s', backoffCoefficient: 2, maximumAttempts: 3, nonRetryableErrorTypes: [...REFUSALS] };
  return {
    agent: proxyActivities<AgentActivities>({ ...base, startToCloseTimeout: APPLY_TIMEOUT, retry }),
    observer: proxyActivities<AgentActivities>({ ...base, startToCloseTimeout: OBSERVE_TIMEOUT, retry }),
    watcher: proxyActivities<AgentActivities>({
      ...base,
      startToCloseTimeout: WATCH_WINDOW_MS + 60_000,
      retry: { maximumAttempts: 1 },
    }),
    nodeTimeout,
    resources: agentResources(intent),
  };
}

function passPorts(loop: Loop): PassPorts {
  const { node, agents } = loop;
  const resources = agents.resources;
  const generation = loop.intent.generation;
  // The observation after an apply is the pass's proof: the UI names it the probe.
  let acted = false;
  return {
    observe: async (): Promise<Snapshot> => {
      const summary = summaryLine(`${acted ? 'probe' : 'observe'} ${node}`);
      try {
        const observation = await agents.observer.observe.executeWithOptions({ summary }, [{ node, resources, generation }]);
        loop.observedMarkers = markersOf(observation);
        return { observation, unreachable: null };
      } catch (error) {
        loop.observedMarkers = null;
        return { observation: null, unreachable: describeFailure(error, agents.nodeTimeout) };
      }
    },
    readAuthority: async () => authorityView(await readAuthority(node)),
    apply: async (action: AuthorizedAction): Promise<ExecutionEvidence | ApplyFailure> => {
      acted = true;
      try {
        return await agents.agent.apply.executeWithOptions(
          { summary: summaryLine(`apply ${action.action} ${action.resource_key}`) },
          [{ node, action }],
        );
      } catch (error) {
        return applyFailure(error, agents.nodeTimeout);
      }
    },
    now: nowIso,
    ruleInForce: inForce,
  };
}

/** The change marker of each observed resource, as the watch compares them. */
function markersOf(observation: Observation): Record<string, string | null> {
  return Object.fromEntries(Object.entries(observation.resources).map(([key, r]) => [key, r.marker]));
}

/**
 * Waits for a signal, the watch seeing a change, or the recheck trigger's time. A watch that
 * ends meanwhile without a change (under WATCH_RULE.failureRetriesSoon) is started again, after a pause if it
 * failed, and the wait goes on to the same wake time: a restarted agent or a missed heartbeat
 * costs the node at most that pause of watching, not the rest of its resync interval. A loop
 * whose watch runs until the wake waits exactly as before, on one timer.
 */
async function waitForEvidence(loop: Loop): Promise<void> {
  const wakeAt = Date.now() + nextWakeMs(loop.lastDecision, loop.intent.policy, Date.now());
  const evidence = () => loop.pending.length > 0 || loop.recheckRequested || loop.watchFired;
  for (;;) {
    startWatch(loop);
    const wanted = watchWanted(loop.intent.policy, loop.lastDecision?.convergence_status ?? null);
    if (loop.watchRetry && (!wanted || loop.watch.running)) loop.watchRetry = false;
    const untilWake = Math.max(0, wakeAt - Date.now());
    const retrying = loop.watchRetry;
    const timeout = retrying ? Math.min(untilWake, Math.max(0, loop.watch.retry_at_ms - Date.now())) : untilWake;
    const summary = retrying
      ? `watch ${loop.node} again after a failed watch`
      : waitSummary(loop.lastDecision, loop.history, loop.intent.policy);
    await condition(() => evidence() || (!retrying && loop.watchRetry), timeout, { summary });
    if (evidence() || Date.now() >= wakeAt) return;
  }
}

/** Event-driven observation: one watch at a time; its return (a change) wakes the loop. */
function startWatch(loop: Loop): void {
  if (!mayWatch(loop.intent.policy, loop.watch, loop.lastDecision?.convergence_status ?? null, Date.now())) return;
  loop.watch.running = true;
  loop.watchRetry = false;
  const request: WatchRequest = { node: loop.node, resources: loop.agents.resources, window_ms: WATCH_WINDOW_MS };
  if (loop.observedMarkers && loop.baselineTrusted) request.baseline = loop.observedMarkers;
  void loop.agents.watcher.watch.executeWithOptions({ summary: summaryLine(`watch ${loop.node}`) }, [request]).then(
    (result) => {
      loop.watch.running = false;
      if (result.changed.length > 0) loop.watchFired = true;
      // Ended with nothing seen (its agent shut down, or its window ran out): under
      // the watch rule the wait starts the next one at once; its baseline, the last
      // observation, still catches a change made in between.
      else if (inForce(WATCH_RULE.failureRetriesSoon)) loop.watchRetry = true;
      // A change found against the baseline sends the next watch without one: should the
      // observation and the watch ever spell a marker differently, that costs one extra pass per
      // real change instead of a pass after pass.
      loop.baselineTrusted = result.reason !== 'changed since observation';
    },
    () => {
      loop.watch.running = false;
      if (inForce(WATCH_RULE.failureRetriesSoon)) {
        // The agent restarted, missed a heartbeat or refused: watch again after a short pause.
        loop.watch.retry_at_ms = watchRetrySoonAtMs(loop.intent.policy, Date.now());
        loop.watchRetry = true;
      } else {
        // Recorded before the rule: resync kept observing, and watching waited one interval.
        loop.watch.retry_at_ms = watchRetryAtMs(loop.intent.policy, Date.now());
      }
    },
  );
}

function authorityView(read: AuthorityRead): AuthorityView {
  return read.ok
    ? { ok: true, generation: read.intent.generation, digest: read.intent.digest }
    : { ok: false, error: read.error };
}

/** A failed apply as the domain reads it: the agent's typed refusal, or a failure to act. */
function applyFailure(error: unknown, nodeTimeout: string): ApplyFailure {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (cause instanceof ApplicationFailure && outcomeOfFailure(cause.type) === 'refused') {
    return { kind: 'refused', refusal_type: cause.type ?? '', message: cause.message };
  }
  return { kind: 'failed', detail: describeFailure(error, nodeTimeout) };
}

function describeFailure(error: unknown, nodeTimeout: string): string {
  if (
    error instanceof ActivityFailure &&
    error.cause instanceof TimeoutFailure &&
    error.cause.timeoutType === TimeoutType.SCHEDULE_TO_START
  ) {
    return `no agent took the task on its queue within node_timeout ${nodeTimeout}`;
  }
  if (error instanceof ActivityFailure && error.cause) return `${error.cause.name}: ${error.cause.message}`;
  return error instanceof Error ? error.message : String(error);
}

const nowIso = () => new Date(Date.now()).toISOString();

// ---------------------------------------------------------------------------------------------
// Input: a workflow start is outside input, checked before anything else.

function checkInput(input: ReconcileNodeInput): void {
  const problems: string[] = [];
  if (!input || typeof input !== 'object') problems.push('input must be {"node": "<node>", "generation": <G>}');
  else {
    if (!nodeId.safeParse(input.node).success) problems.push(`node ${echo(input.node)} is not a node name`);
    if (!Number.isInteger(input.generation) || input.generation < 1)
      problems.push(`generation ${echo(input.generation)} must be a whole number of 1 or more`);
  }
  if (problems.length > 0) {
    throw ApplicationFailure.nonRetryable(
      withFix(`reconcileNode input rejected: ${problems.join('; ')}`, 'start it with {"node": "N-24", "generation": 12}'),
      'InvalidWorkflowInput',
    );
  }
}

/**
 * Carried state is accepted only from continue-as-new of this same workflow (the server sets
 * continuedFromExecutionRunId for that and nothing a client can start), and only when the
 * carried intent is what its own digest says, for this node and generation. A plain start with
 * a `carry` field would otherwise inject resources, service commands included, under the
 * authority's provenance. Every pass still compares that digest with the authority before acting.
 */
function trustedCarry(input: ReconcileNodeInput): ReconcileCarry | null {
  const carry = input.carry;
  if (carry === undefined) return null;
  if (!workflowInfo().continuedFromExecutionRunId) {
    throw ApplicationFailure.nonRetryable(
      withFix(
        'reconcileNode input rejected: "carry" is handed over by continue-as-new of this workflow only, and this run was started directly',
        `start it with {"node": "${input.node}", "generation": ${input.generation}} and nothing else; Datum carries its own state`,
      ),
      'InvalidWorkflowInput',
    );
  }
  const intent = carry.intent;
  const digest = desiredDigest(intent.resources, intent.policy);
  if (intent.node !== input.node || intent.generation !== input.generation || digest !== intent.digest) {
    throw ApplicationFailure.nonRetryable(
      withFix(
        `reconcileNode carried state rejected: it holds ${intent.node} generation ${intent.generation} with content digest ${digest}, but claims ${input.node} generation ${input.generation} with ${intent.digest}`,
        `terminate this run and start datum/${input.node}/gen-${input.generation} again (datum rollout start --generation ${input.generation})`,
      ),
      'InvalidWorkflowInput',
    );
  }
  return carry;
}

/** How often a loop started on desired state that does not validate reads it again. */
const INVALID_AT_START_RETRY = '30s';

/**
 * A loop started while its desired-state file does not validate (a hand-over whose successor
 * finds the file broken meanwhile, or a direct start) does not fail: outside input never ends a
 * loop. It shows as BLOCKED with INVALID_DESIRED_STATE in visibility and reads the file again
 * until it validates. An unknown node or a wrong generation is a wrong start, not bad input: those
 * still fail. Patched: a run recorded before failed at once, and replays as it did.
 */
async function readValidAuthority(input: ReconcileNodeInput, opening: OpeningPatches): Promise<AuthorityRead> {
  for (let shown = false; ; shown = true) {
    const read = await readAuthority(input.node);
    if (read.ok || read.kind === 'unknown_node' || !opening.waitForValid()) return read;
    if (!shown) showInvalidAtStart(input, read.error);
    log.warn('desired state does not validate; reading it again', { node: input.node, error: read.error });
    await sleep(INVALID_AT_START_RETRY, { summary: 'wait for valid desired state' });
  }
}

/** A workflow is bound to the generation it was started for; the authority must hold exactly that. */
function bindAtStart(read: AuthorityRead, input: ReconcileNodeInput): BoundIntent {
  if (!read.ok) {
    throw ApplicationFailure.nonRetryable(read.error, read.kind === 'unknown_node' ? 'UnknownNode' : 'InvalidDesiredState');
  }
  if (read.intent.generation !== input.generation) {
    throw ApplicationFailure.nonRetryable(
      withFix(
        `the authority for ${input.node} is at generation ${read.intent.generation}, not ${input.generation}`,
        `start datum/${input.node}/gen-${read.intent.generation} (datum rollout start --generation ${read.intent.generation}), or commit generation ${input.generation}`,
      ),
      'GenerationNotAtAuthority',
    );
  }
  return read.intent;
}
