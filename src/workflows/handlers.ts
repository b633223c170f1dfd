/*
 * Signals, Updates and queries. Handlers only queue: the loop handles signals in order, between
 * passes (handleSignals), at a point where no pass is half done. An Update of a signal's name
 * queues as that signal, and its handler returns once the loop recorded the decision (updates.ts).
 */
import { ParentClosePolicy, setHandler, startChild } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { decisionRequest, judgeRefresh, parseSignal, recordResolution, recordSignal, type BoundIntent } from '../domain';
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_PATCH,
  WORKFLOW_TYPES,
  ledgerQuery,
  recheckSignal,
  reconcileWorkflowId,
  refreshDesiredSignal,
  refreshDesiredUpdate,
  resolveConflictSignal,
  resolveConflictUpdate,
  stateQuery,
  type NodeState,
  type ReconcileNodeWorkflow,
} from '../contract';
import { handOverAttributes, rebindAttributes } from './attributes';
import { nodeAgents, recordDecisions, type NodeAgents } from './agents';
import { authorityView, readAuthority } from './intent';
import { flushLedger, note, nowIso, type Recorder } from './ledger';
import { inForce } from './patches';
import { awaitReply, checkNotHandedOver, checkPayload, replyOf, type Reply } from './updates';

/**
 * A signal waiting for the loop; a recheck with a bad payload waits as its rejection. An Update
 * of the same name waits here too, with the reply its handler is waiting for.
 */
export type Pending =
  | { signal: typeof refreshDesiredSignal; payload: unknown; reply?: Reply }
  | { signal: typeof resolveConflictSignal; payload: unknown; reply?: Reply }
  | { signal: typeof recheckSignal; rejected: string; reply?: undefined };

export interface Inbox {
  pending: Pending[];
  /** The loop that owns the node now, once this one handed over. */
  supersededBy: string | null;
  /** A pass is owed at once: a valid recheck arrived, or a handled signal asks for the pass that follows now. */
  recheckRequested: boolean;
  /** A valid recheck arrived since the last pass: it clears an earlier rejected one. */
  recheckAccepted: boolean;
}

export const emptyInbox = (): Inbox => ({ pending: [], supersededBy: null, recheckRequested: false, recheckAccepted: false });

/** The part of the loop that signals read and move. */
export interface Signalled extends Recorder {
  intent: BoundIntent;
  agents: NodeAgents;
  readonly inbox: Inbox;
}

export function installHandlers(loop: Signalled): void {
  const { inbox } = loop;
  setHandler(refreshDesiredSignal, (payload) => void inbox.pending.push({ signal: refreshDesiredSignal, payload }));
  setHandler(resolveConflictSignal, (payload) => void inbox.pending.push({ signal: resolveConflictSignal, payload }));
  setHandler(recheckSignal, (payload) => {
    const parsed = parseSignal(recheckSignal.name, payload);
    if (parsed.ok) {
      inbox.recheckRequested = true;
      inbox.recheckAccepted = true;
    } else inbox.pending.push({ signal: recheckSignal, rejected: parsed.error });
  });
  setHandler(ledgerQuery, () => loop.ledger.entries);
  setHandler(stateQuery, () => stateOf(loop));
  const queue = (pending: Pending & { reply: Reply }) => (inbox.pending.push(pending), awaitReply(pending.reply));
  setHandler(refreshDesiredUpdate, (payload) => queue({ signal: refreshDesiredSignal, payload, reply: {} }), {
    validator: (payload) => {
      checkNotHandedOver(inbox.supersededBy);
      checkPayload(refreshDesiredSignal.name, payload);
    },
  });
  setHandler(resolveConflictUpdate, (payload) => queue({ signal: resolveConflictSignal, payload, reply: {} }), {
    validator: (payload) => validateResolution(loop, payload),
  });
}

/** An Update's validator: the payload, and a resolution the history can take now (an open conflict on that key). */
function validateResolution(loop: Signalled, payload: unknown): void {
  checkNotHandedOver(loop.inbox.supersededBy);
  const parsed = parseSignal(resolveConflictSignal.name, payload);
  if (!parsed.ok) throw new Error(parsed.error);
  const resolved = recordResolution(loop.history, parsed.value, nowIso());
  if (resolved.error) throw new Error(`resolveConflict rejected: ${resolved.error}`);
}

function stateOf(loop: Signalled): NodeState {
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
    last_verified_at: loop.ledger.lastVerifiedAt,
    ledger_entries: loop.ledger.nextSeq - 1,
    superseded_by: loop.inbox.supersededBy,
  };
}

/** Handles the queued signals in order; true when this loop has handed over and must end. */
export async function handleSignals(loop: Signalled): Promise<boolean> {
  const { inbox } = loop;
  for (let next = inbox.pending.shift(); next; next = inbox.pending.shift()) {
    const fromSeq = loop.ledger.nextSeq;
    const done = await handleSignal(loop, next);
    await flushLedger(loop);
    if (next.reply) next.reply.result = replyOf(loop.ledger.entries, fromSeq, loop.lastDecision!, inbox.supersededBy);
    if (done) return true;
  }
  return false;
}

async function handleSignal(loop: Signalled, pending: Pending): Promise<boolean> {
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
 * any other name does. Recorded by the loop as a pass begins, not by the handler, so a pass in
 * flight cannot undo it.
 */
export function acceptRecheck(loop: Signalled): void {
  if (!loop.inbox.recheckAccepted) return;
  loop.inbox.recheckAccepted = false;
  if (loop.history.rejected_signals[recheckSignal.name] && inForce(WORKFLOW_PATCH.validRecheckClearsRejection)) {
    loop.history = recordSignal(loop.history, recheckSignal.name, null);
  }
}

/** A malformed or refused signal is recorded, raises INVALID_SIGNAL, and the loop goes on. */
function rejectSignal(loop: Signalled, name: Parameters<typeof recordSignal>[1], error: string, detail: string): void {
  loop.history = recordSignal(loop.history, name, { error, at: nowIso() });
  note(loop, { reason: 'SIGNAL_REJECTED', detail });
}

async function resolveConflict(loop: Signalled, payload: unknown): Promise<void> {
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
  loop.inbox.recheckRequested = true;
}

const PASS_FOLLOWS_NOW = { trigger: 'FRESH_OBSERVATION', not_before: null, detail: 'the pass that follows now' } as const;

/** refreshDesired: the same generation re-binds, a newer one hands over, anything else is refused. */
async function refreshDesired(loop: Signalled, payload: unknown): Promise<boolean> {
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
    loop.inbox.recheckRequested = true;
    return false;
  }
  const successor = await startSuccessor(loop.node, parsed.value);
  loop.inbox.supersededBy = successor;
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
