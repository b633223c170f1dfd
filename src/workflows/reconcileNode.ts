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
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { TimeoutType, WorkflowExecutionAlreadyStartedError, type SearchAttributeUpdatePair } from '@temporalio/common';
import {
  decide,
  decisionFingerprint,
  durationMs,
  emptyHistory,
  judgeRefresh,
  noteDecision,
  nodeId,
  parseSignal,
  recordResolution,
  recordSignal,
  type AuthorityView,
  type BoundIntent,
  type Decision,
  type ExecutionEvidence,
  type History,
  type LedgerEntry,
  type AuthorizedAction,
  type Observation,
  LEDGER_VERSION,
} from '../domain';
import {
  CONTROL_PERMANENT_ERRORS,
  CONTROL_TASK_QUEUE,
  LEDGER_PERMANENT_ERRORS,
  MAX_HISTORY_EVENTS,
  DatumConditions,
  DatumDigest,
  DatumGeneration,
  DatumMode,
  DatumNode,
  DatumStatus,
  MEMO_SUMMARY,
  REFUSALS,
  agentTaskQueue,
  ledgerQuery,
  recheckSignal,
  reconcileWorkflowId,
  refreshDesiredSignal,
  resolveConflictSignal,
  stateQuery,
  type AgentActivities,
  type AuthorityRead,
  type ControlActivities,
  type NodeState,
  type ReconcileCarry,
  type ReconcileNodeInput,
  type ReconcileNodeWorkflow,
  type ReconcileResult,
  WORKFLOW_TYPES,
} from '../contract';
import { decisionRecorded, observationJudged } from './metrics';

/** Ledger entries kept in the workflow and carried across continue-as-new (the store keeps all). */
const LEDGER_TAIL = 50;

const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', maximumAttempts: 5, nonRetryableErrorTypes: [...CONTROL_PERMANENT_ERRORS] },
});

const store = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', maximumInterval: '10s', maximumAttempts: 5, nonRetryableErrorTypes: [...LEDGER_PERMANENT_ERRORS] },
});

/**
 * The node's agent. scheduleToStartTimeout is node_timeout: an agent that does not pick the
 * task up by then is unreachable, which is a decision (NODE_UNREACHABLE), not a hang.
 */
/** How long one watch runs before it returns "nothing changed" and the loop starts another. */
const WATCH_WINDOW_MS = 10 * 60_000;

/**
 * The agent's watch: long-lived, so it heartbeats (a dead agent is noticed within the heartbeat
 * timeout) and is never retried by Temporal; the loop decides when to start the next one.
 */
function watcherFor(node: string, nodeTimeout: string) {
  return proxyActivities<AgentActivities>({
    taskQueue: agentTaskQueue(node),
    scheduleToStartTimeout: durationMs(nodeTimeout),
    startToCloseTimeout: WATCH_WINDOW_MS + 60_000,
    heartbeatTimeout: '30s',
    retry: { maximumAttempts: 1 },
  });
}

function agentFor(node: string, nodeTimeout: string, startToClose: string = APPLY_TIMEOUT) {
  return proxyActivities<AgentActivities>({
    taskQueue: agentTaskQueue(node),
    scheduleToStartTimeout: durationMs(nodeTimeout),
    startToCloseTimeout: startToClose,
    // The agent heartbeats every 5 s while it works: a silent task is lost, and is retried.
    heartbeatTimeout: '30s',
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumAttempts: 3, nonRetryableErrorTypes: [...REFUSALS] },
  });
}

/** An apply may fetch and unpack a release or wait for a service to become healthy. */
const APPLY_TIMEOUT = '10m';
/**
 * An observation reads files and /proc and probes health with short timeouts: seconds. Past this
 * the task is taken as lost (an agent that died holding it, a poll answered after the agent
 * stopped waiting for it) and retried, instead of holding the loop for an apply's ten minutes.
 */
const OBSERVE_TIMEOUT = '1m';

const nowIso = () => new Date(Date.now()).toISOString();

/**
 * One node at one desired generation, until superseded or cancelled: observe, decide, act
 * where authorized, probe, record, wait. Every judgement is a call into src/domain.
 */
export async function reconcileNode(input: ReconcileNodeInput): Promise<ReconcileResult> {
  checkInput(input);
  const { node } = input;
  const workflowId = workflowInfo().workflowId;

  let intent: BoundIntent;
  let history: History;
  let ledger: LedgerEntry[];
  let nextSeq: number;
  let lastVerifiedAt: string | null;
  let lastFingerprint: string | null;
  let unstored: LedgerEntry[];
  const runs = (input.carry?.runs ?? 0) + 1;

  if (input.carry) {
    ({ intent, history, ledger_tail: ledger, next_seq: nextSeq, last_verified_at: lastVerifiedAt, last_fingerprint: lastFingerprint } = input.carry);
    unstored = input.carry.unstored ?? [];
  } else {
    intent = bindAtStart(await control.readAuthority(node), input);
    history = emptyHistory();
    ledger = [];
    nextSeq = 1;
    lastVerifiedAt = null;
    lastFingerprint = null;
    unstored = [];
  }
  const chainId = workflowInfo().firstExecutionRunId;
  /** The last pass's or note's decision, recorded or not (a steady pass is not). */
  let lastDecision: Decision | null = input.carry?.last_decision ?? (ledger.length > 0 ? ledger[ledger.length - 1] : null);
  let supersededBy: string | null = null;
  let agent = agentFor(node, intent.policy.node_timeout);
  let observer = agentFor(node, intent.policy.node_timeout, OBSERVE_TIMEOUT);
  let watcher = watcherFor(node, intent.policy.node_timeout);
  // Event-driven observation: one watch at a time; its return (a change) wakes the loop.
  let watching = false;
  let watchFired = false;
  let watchRetryAt = 0;
  const startWatch = () => {
    // While a backoff timer runs, a change must not bring the next attempt forward.
    if (!intent.policy.watch || watching || Date.now() < watchRetryAt || lastDecision?.convergence_status === 'RETRY') return;
    watching = true;
    void watcher.watch({ node, resources: resolvedResources(intent), window_ms: WATCH_WINDOW_MS }).then(
      (result) => {
        watching = false;
        if (result.changed.length > 0) watchFired = true;
      },
      () => {
        // The agent is away or failed: resync keeps observing; try watching again after one interval.
        watching = false;
        watchRetryAt = Date.now() + durationMs(intent.policy.resync_interval);
      },
    );
  };

  // Signals are queued and handled by the loop, in order, so each one becomes one ledger entry
  // at a point where no pass is half done.
  type Pending = { name: 'refreshDesired' | 'resolveConflict'; payload: unknown };
  const pending: Pending[] = [];
  let recheckRequested = false;
  setHandler(refreshDesiredSignal, (payload) => void pending.push({ name: 'refreshDesired', payload }));
  setHandler(resolveConflictSignal, (payload) => void pending.push({ name: 'resolveConflict', payload }));
  setHandler(recheckSignal, (payload) => {
    const parsed = parseSignal('recheck', payload);
    if (parsed.ok) recheckRequested = true;
    else pending.push({ name: 'resolveConflict', payload: { __recheck_error: parsed.error } });
  });
  setHandler(ledgerQuery, () => ledger);
  setHandler(stateQuery, (): NodeState => ({
    node,
    workflow_id: workflowId,
    convergence_status: lastDecision?.convergence_status ?? null,
    reason: lastDecision?.reason ?? null,
    reason_detail: lastDecision?.reason_detail ?? null,
    recheck_trigger: lastDecision?.recheck_trigger ?? null,
    conditions: history.conditions,
    attempt_count: history.attempt_count,
    retry_budget: intent.policy.retry_budget,
    desired_generation: intent.generation,
    desired_digest: intent.digest,
    mode: lastDecision?.mode ?? null,
    last_verified_at: lastVerifiedAt,
    ledger_entries: nextSeq - 1,
    superseded_by: supersededBy,
  }));

  const upserted = new Map<string, string>();
  const upsertIfChanged = (pairs: SearchAttributeUpdatePair[]) => {
    // Status churn is a defect: only what changed is written.
    const changed = pairs.filter((p) => upserted.get(p.key.name) !== JSON.stringify(p.value));
    if (changed.length === 0) return;
    upsertSearchAttributes(changed);
    for (const p of changed) upserted.set(p.key.name, JSON.stringify(p.value));
  };
  const seedUpserted = () => {
    const current = workflowInfo().typedSearchAttributes;
    for (const key of [DatumNode, DatumGeneration, DatumDigest, DatumStatus, DatumConditions, DatumMode]) {
      const value = current.get(key);
      if (value !== undefined) upserted.set(key.name, JSON.stringify(value));
    }
  };
  seedUpserted();
  upsertIfChanged([
    { key: DatumNode, value: node },
    { key: DatumGeneration, value: intent.generation },
    { key: DatumDigest, value: intent.digest },
  ]);

  const record = (decision: Decision, force: boolean) => {
    // Only a pass (not forced) judged a snapshot; a note carries the last one's observed_at.
    if (!force) observationJudged(decision, nowIso());
    if (decision.observation_fresh && decision.observed_at) lastVerifiedAt = decision.post_action_observation ? nowIso() : decision.observed_at;
    // The node's current judgement, written or not: its recheck trigger times the next pass (a
    // steady pass's trigger, not the one of the entry it matched, which is already due).
    lastDecision = decision;
    const fingerprint = decisionFingerprint(decision);
    // Steady state: nothing changed, nothing written. A pass that acted is always recorded.
    if (!force && decision.execution_evidence.length === 0 && fingerprint === lastFingerprint) return;
    lastFingerprint = fingerprint;
    const entry: LedgerEntry = { ...decision, ledger_version: LEDGER_VERSION, seq: nextSeq++, decided_at: nowIso(), workflow_id: workflowId };
    ledger.push(entry);
    unstored.push(entry);
    if (ledger.length > LEDGER_TAIL * 2) ledger = ledger.slice(-LEDGER_TAIL);
    decisionRecorded(decision);
    upsertIfChanged([
      { key: DatumStatus, value: decision.convergence_status },
      { key: DatumConditions, value: [...new Set(decision.conditions.map((c) => c.type))].sort() },
      ...(decision.mode ? [{ key: DatumMode, value: decision.mode } as SearchAttributeUpdatePair] : []),
    ]);
    upsertMemo({ [MEMO_SUMMARY]: summarize(decision) });
    // Shown at the top of the workflow's page in the Web UI ("current details"); not history.
    setCurrentDetails(`**${decision.convergence_status}** ${decision.reason} (generation ${decision.desired_generation})\n\n${decision.reason_detail}`);
  };

  /**
   * Appends recorded entries to the fleet-wide store, oldest first. An entry the store could not
   * take stays queued (and is carried across continue-as-new): the loop never stops for the
   * store, and nothing recorded is dropped.
   */
  const flush = async () => {
    while (unstored.length > 0) {
      try {
        await store.appendLedger({ entry: unstored[0], chain_id: chainId });
        unstored.shift();
      } catch (error) {
        log.warn('ledger store did not take an entry; it stays queued', { seq: unstored[0].seq, error: String(error) });
        return;
      }
    }
  };

  const readAuthority = async (): Promise<{ view: AuthorityView; read: AuthorityRead }> => {
    const read = await control.readAuthority(node);
    return { read, view: read.ok ? { ok: true, generation: read.intent.generation, digest: read.intent.digest } : { ok: false, error: read.error } };
  };

  const observe = async (): Promise<{ observation: Observation | null; unreachable: string | null }> => {
    try {
      return { observation: await observer.observe({ node, resources: resolvedResources(intent) }), unreachable: null };
    } catch (error) {
      return { observation: null, unreachable: describeFailure(error, intent.policy.node_timeout) };
    }
  };

  /** One pass of the loop. Returns the decision to record. */
  const pass = async (): Promise<Decision> => {
    const pre = await observe();
    // The authority is re-read after observing and before deciding, so no action runs on intent
    // older than the snapshot it was planned from.
    const { view } = await readAuthority();
    const first = decide({ intent, authority: view, observation: pre.observation, unreachable: pre.unreachable, history, now: nowIso() });
    if (first.decision.authorized_actions.length === 0 || !pre.observation) {
      history = first.history;
      return first.decision;
    }
    const actions = first.decision.authorized_actions;
    const evidence: ExecutionEvidence[] = [];
    let stopped: string | null = null;
    for (const action of actions) {
      if (stopped) {
        evidence.push(skipped(action, stopped));
        continue;
      }
      try {
        evidence.push(await agent.apply({ node, action }));
      } catch (error) {
        const ev = failedEvidence(action, error, intent.policy.node_timeout);
        evidence.push(ev);
        stopped = `skipped: ${action.resource_key} ${ev.outcome} before it`;
      }
    }
    // Convergence is judged only from a fresh probe taken after acting, never from the evidence.
    const post = await observe();
    const final = decide({
      intent,
      authority: view,
      observation: post.observation,
      unreachable: post.unreachable,
      history,
      now: nowIso(),
      acted: { planned: first.decision.planned_actions, actions, evidence, pre: pre.observation },
    });
    history = final.history;
    return final.decision;
  };

  const note = (n: Parameters<typeof noteDecision>[3]) => {
    const r = noteDecision(intent, lastDecision, history, n, nowIso());
    history = r.history;
    record(r.decision, true);
  };

  /** Handles one queued signal; returns true when this loop has handed over and must end. */
  const handle = async (signal: Pending): Promise<boolean> => {
    const raw = signal.payload as { __recheck_error?: string } | undefined;
    if (raw && typeof raw === 'object' && '__recheck_error' in raw) {
      history = recordSignal(history, 'recheck', { error: raw.__recheck_error ?? 'invalid', at: nowIso() });
      note({ reason: 'SIGNAL_REJECTED', detail: raw.__recheck_error ?? 'recheck rejected' });
      return false;
    }
    if (signal.name === 'resolveConflict') {
      const parsed = parseSignal('resolveConflict', signal.payload);
      if (!parsed.ok) {
        history = recordSignal(history, 'resolveConflict', { error: parsed.error, at: nowIso() });
        note({ reason: 'SIGNAL_REJECTED', detail: parsed.error });
        return false;
      }
      const resolved = recordResolution(recordSignal(history, 'resolveConflict', null), parsed.value, nowIso());
      if (resolved.error) {
        history = recordSignal(history, 'resolveConflict', { error: `resolveConflict rejected: ${resolved.error}`, at: nowIso() });
        note({ reason: 'SIGNAL_REJECTED', detail: `resolveConflict for "${parsed.value.resource_key}" by ${parsed.value.by} rejected: ${resolved.error}.` });
        return false;
      }
      history = resolved.history;
      const v = parsed.value;
      note({
        reason: 'OPERATOR_RESOLUTION_RECORDED',
        detail: `${v.by} resolved the conflict on "${v.resource_key}" by ${v.resolution}${v.note ? ` (${v.note})` : ''}; it closes when a fresh observation confirms it.`,
        trigger: { trigger: 'FRESH_OBSERVATION', not_before: null, detail: 'the pass that follows now' },
      });
      recheckRequested = true;
      return false;
    }
    const parsed = parseSignal('refreshDesired', signal.payload);
    if (!parsed.ok) {
      history = recordSignal(history, 'refreshDesired', { error: parsed.error, at: nowIso() });
      note({ reason: 'SIGNAL_REJECTED', detail: parsed.error });
      return false;
    }
    history = recordSignal(history, 'refreshDesired', null);
    const { read, view } = await readAuthority();
    const verdict = judgeRefresh(intent, parsed.value, view);
    if (verdict.verdict === 'refuse') {
      note({ reason: 'REFRESH_REFUSED', detail: verdict.detail });
      return false;
    }
    if (verdict.verdict === 'rebind') {
      if (!read.ok) throw new Error('unreachable: judgeRefresh re-binds only to an authority it could read');
      intent = read.intent;
      agent = agentFor(node, intent.policy.node_timeout);
      observer = agentFor(node, intent.policy.node_timeout, OBSERVE_TIMEOUT);
      watcher = watcherFor(node, intent.policy.node_timeout);
      upsertIfChanged([{ key: DatumDigest, value: intent.digest }]);
      note({ reason: 'REBOUND', detail: verdict.detail, trigger: { trigger: 'FRESH_OBSERVATION', not_before: null, detail: 'the pass that follows now' } });
      recheckRequested = true;
      return false;
    }
    const successor = reconcileWorkflowId(node, parsed.value.generation);
    try {
      await startChild<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
        workflowId: successor,
        taskQueue: CONTROL_TASK_QUEUE,
        args: [{ node, generation: parsed.value.generation }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        typedSearchAttributes: [
          { key: DatumNode, value: node },
          { key: DatumGeneration, value: parsed.value.generation },
          { key: DatumDigest, value: parsed.value.digest },
        ],
      });
    } catch (error) {
      // Already running (a rollout started it first): attach, which needs nothing more.
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    }
    supersededBy = successor;
    note({
      status: 'SUPERSEDED',
      reason: 'NEWER_GENERATION',
      detail: verdict.detail.replace('datum/<node>/', `datum/${node}/`),
      trigger: { trigger: 'NONE', not_before: null, detail: `${successor} owns the node now` },
    });
    return true;
  };

  for (;;) {
    while (pending.length > 0) {
      const done = await handle(pending.shift()!);
      await flush();
      if (done) {
        await condition(allHandlersFinished);
        return { node, generation: intent.generation, convergence_status: 'SUPERSEDED', superseded_by: supersededBy! };
      }
    }
    recheckRequested = false;
    watchFired = false;
    record(await pass(), false);
    await flush();
    if (pending.length > 0 || recheckRequested) continue;

    startWatch();
    await condition(() => pending.length > 0 || recheckRequested || watchFired, waitMs(lastDecision, intent));

    const info = workflowInfo();
    if ((info.continueAsNewSuggested || info.historyLength > MAX_HISTORY_EVENTS) && pending.length === 0) {
      await condition(allHandlersFinished);
      const carry: ReconcileCarry = {
        intent,
        history,
        ledger_tail: ledger.slice(-LEDGER_TAIL),
        next_seq: nextSeq,
        last_verified_at: lastVerifiedAt,
        last_fingerprint: lastFingerprint,
        last_decision: lastDecision,
        runs,
        unstored,
      };
      await continueAsNew<typeof reconcileNode>({ node, generation: input.generation, carry });
    }
  }
}

function checkInput(input: ReconcileNodeInput): void {
  const problems: string[] = [];
  if (!input || typeof input !== 'object') problems.push('input must be {"node": "<node>", "generation": <G>}');
  else {
    if (!nodeId.safeParse(input.node).success) problems.push(`node ${JSON.stringify(input.node)} is not a node name`);
    if (!Number.isInteger(input.generation) || input.generation < 1) problems.push(`generation ${JSON.stringify(input.generation)} must be a whole number of 1 or more`);
  }
  if (problems.length > 0) {
    throw ApplicationFailure.nonRetryable(`reconcileNode input rejected: ${problems.join('; ')} — fix: start it with {"node": "N-24", "generation": 12}`, 'InvalidWorkflowInput');
  }
}

/** A workflow is bound to the generation it was started for; the authority must hold exactly that. */
function bindAtStart(read: AuthorityRead, input: ReconcileNodeInput): BoundIntent {
  if (!read.ok) {
    throw ApplicationFailure.nonRetryable(read.error, read.kind === 'unknown_node' ? 'UnknownNode' : 'InvalidDesiredState');
  }
  if (read.intent.generation !== input.generation) {
    throw ApplicationFailure.nonRetryable(
      `the authority for ${input.node} is at generation ${read.intent.generation}, not ${input.generation} — fix: start datum/${input.node}/gen-${read.intent.generation} (datum rollout start --generation ${read.intent.generation}), or commit generation ${input.generation}`,
      'GenerationNotAtAuthority',
    );
  }
  return read.intent;
}

/** The resources as the agent needs them: artifacts at the locations the controller resolved. */
function resolvedResources(intent: BoundIntent): BoundIntent['resources'] {
  const out: BoundIntent['resources'] = {};
  for (const [key, spec] of Object.entries(intent.resources)) {
    out[key] = spec.type === 'release' && intent.locations?.[key] ? { ...spec, artifact: intent.locations[key] } : spec;
  }
  return out;
}

function waitMs(decision: Decision | null, intent: BoundIntent): number {
  const resync = durationMs(intent.policy.resync_interval);
  const notBefore = decision?.recheck_trigger.not_before;
  // A TIMER trigger, or another trigger the loop can meet itself at a time (a stale snapshot).
  if (notBefore) {
    return Math.max(0, Math.min(Date.parse(notBefore) - Date.now(), decision.convergence_status === 'RETRY' ? Number.MAX_SAFE_INTEGER : resync));
  }
  return resync;
}

function describeFailure(error: unknown, nodeTimeout: string): string {
  if (error instanceof ActivityFailure && error.cause instanceof TimeoutFailure && error.cause.timeoutType === TimeoutType.SCHEDULE_TO_START) {
    return `no agent took the task on its queue within node_timeout ${nodeTimeout}`;
  }
  if (error instanceof ActivityFailure && error.cause) return `${error.cause.name}: ${error.cause.message}`;
  return error instanceof Error ? error.message : String(error);
}

function failedEvidence(action: AuthorizedAction, error: unknown, nodeTimeout: string): ExecutionEvidence {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  const refusal = cause instanceof ApplicationFailure && (REFUSALS as readonly string[]).includes(cause.type ?? '') ? `${cause.type}: ${cause.message}` : null;
  return {
    resource_key: action.resource_key,
    action: action.action,
    idempotency_key: action.idempotency_key,
    outcome: refusal ? 'refused' : 'failed',
    executed_at: nowIso(),
    marker_after: null,
    detail: refusal ?? describeFailure(error, nodeTimeout),
    refusal,
  };
}

function skipped(action: AuthorizedAction, why: string): ExecutionEvidence {
  return { resource_key: action.resource_key, action: action.action, idempotency_key: action.idempotency_key, outcome: 'failed', executed_at: nowIso(), marker_after: null, detail: why, refusal: null };
}

function summarize(d: Decision): string {
  const line = `${d.convergence_status} ${d.reason} (gen ${d.desired_generation}): ${d.reason_detail}`;
  return line.length > 240 ? `${line.slice(0, 237)}...` : line;
}
