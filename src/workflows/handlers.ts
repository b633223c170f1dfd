/*
 * Signals, Updates and queries. Handlers only queue: the loop handles signals in order, between
 * passes (handleSignals), at a point where no pass is half done. An Update of a signal's name
 * queues as that signal, and its handler returns once the loop recorded the decision (updates.ts).
 */
import { ParentClosePolicy, setHandler, startChild, workflowInfo } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  decisionRequest,
  foreignItem,
  isLoopResolution,
  judgeLoopResolution,
  judgeRefresh,
  parseLoopResolution,
  parseSignal,
  recordResolution,
  recordSignal,
  ruleOf,
  type BoundIntent,
  type RecordDecisionRequest,
  type WatchState,
} from '../domain';
import {
  WORKFLOW_PATCH,
  WORKFLOW_TYPES,
  withFix,
  holdUpdate,
  ledgerQuery,
  loopResolveWorkUpdate,
  reconcileUpdate,
  unholdUpdate,
  recheckSignal,
  reconcileWorkflowId,
  refreshDesiredSignal,
  refreshDesiredUpdate,
  resolveConflictSignal,
  resolveConflictUpdate,
  stateQuery,
  type DecisionAuthor,
  type LoopResolutionResult,
  type NodeState,
  type OperatorSignature,
  type RefusalType,
  type ReconcileNodeWorkflow,
  type RequesterNote,
} from '../contract';
import { handOverAttributes, rebindAttributes } from './attributes';
import { nodeAgents, recordDecisions, watchEvent, type AgentPatches, type NodeAgents } from './agents';
import { authorityView, readAuthority } from './intent';
import { PASS_FOLLOWS_NOW, flushLedger, note, nowIso, type Recorder } from './ledger';
import { inForce } from './patches';
import { holdNow, reconcileNow, unholdNow, validateHold, type Holdable } from './holds';
import { requesterOf, signalCounter, stampRequester, thisUpdate, type RequestRef } from './requesters';
import { awaitReply, checkNotHandedOver, checkPayload, replyOf, type Reply } from './updates';

/**
 * A signal waiting for the loop; a recheck with a bad payload waits as its rejection. An Update
 * of the same name waits here too, with the reply its handler is waiting for.
 */
export type Pending =
  | { signal: typeof refreshDesiredSignal; payload: unknown; reply?: Reply; ref: RequestRef }
  | { signal: typeof resolveConflictSignal; payload: unknown; reply?: Reply; ref: RequestRef }
  | { signal: typeof recheckSignal; rejected: string; reply?: undefined; ref: RequestRef }
  /** A work item's resolution (docs/work-items.md): an Update only, no signal of that name. */
  | { signal: typeof loopResolveWorkUpdate; payload: unknown; reply: Reply }
  /** `datum hold` and `datum unhold` (holds.ts): Updates only. */
  | { signal: typeof holdUpdate | typeof unholdUpdate; hold: 'hold' | 'unhold'; payload: unknown; reply: Reply; ref: RequestRef };

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
export interface Signalled extends Recorder, Holdable {
  intent: BoundIntent;
  agents: NodeAgents;
  readonly inbox: Inbox;
  /** The patches that shape how this run reaches its agent (agents.ts). */
  readonly agentPatches: AgentPatches;
  watch: WatchState;
}

export function installHandlers(loop: Signalled): void {
  const { inbox } = loop;
  // Every signal is counted, valid or not, so the count names its event in the run's history.
  const received = signalCounter();
  setHandler(refreshDesiredSignal, (payload) => {
    inbox.pending.push({ signal: refreshDesiredSignal, payload, ref: received(refreshDesiredSignal.name) });
  });
  setHandler(resolveConflictSignal, (payload) => {
    inbox.pending.push({ signal: resolveConflictSignal, payload, ref: received(resolveConflictSignal.name) });
  });
  setHandler(recheckSignal, (payload) => {
    const ref = received(recheckSignal.name);
    const parsed = parseSignal(recheckSignal.name, payload);
    if (parsed.ok) {
      inbox.recheckRequested = true;
      inbox.recheckAccepted = true;
    } else inbox.pending.push({ signal: recheckSignal, rejected: parsed.error, ref });
  });
  setHandler(ledgerQuery, () => loop.ledger.entries);
  setHandler(stateQuery, () => stateOf(loop));
  const queue = (pending: Pending & { reply: Reply }) => (inbox.pending.push(pending), awaitReply(pending.reply));
  setHandler(refreshDesiredUpdate, (payload) => queue({ signal: refreshDesiredSignal, payload, reply: {}, ref: thisUpdate() }), {
    validator: (payload) => {
      checkNotHandedOver(inbox.supersededBy);
      checkPayload(refreshDesiredSignal.name, payload);
    },
  });
  setHandler(
    resolveConflictUpdate,
    (payload) => queue({ signal: resolveConflictSignal, payload, reply: {}, ref: thisUpdate() }),
    {
      validator: (payload) => validateResolution(loop, payload),
    },
  );
  setHandler(holdUpdate, (payload) => queue({ signal: holdUpdate, hold: 'hold', payload, reply: {}, ref: thisUpdate() }), {
    validator: (payload) => validateHold(loop, 'hold', payload),
  });
  setHandler(unholdUpdate, (payload) => queue({ signal: unholdUpdate, hold: 'unhold', payload, reply: {}, ref: thisUpdate() }), {
    validator: (payload) => validateHold(loop, 'unhold', payload),
  });
  setHandler(reconcileUpdate, () => reconcileNow(loop), { validator: () => checkNotHandedOver(inbox.supersededBy) });
  setHandler(
    loopResolveWorkUpdate,
    async (payload): Promise<LoopResolutionResult> => {
      const { entry } = await queue({ signal: loopResolveWorkUpdate, payload, reply: {} });
      return { entry, seq: entry?.seq ?? loop.ledger.nextSeq - 1 };
    },
    { validator: (payload) => void judgeWork(loop, payload, true) },
  );
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
    hold: loop.history.hold ?? null,
    passes: { ...loop.passes },
    stale_retakes: loop.history.stale_retakes ?? 0,
  };
}

/** Handles the queued signals in order; true when this loop has handed over and must end. */
export async function handleSignals(loop: Signalled): Promise<boolean> {
  const { inbox } = loop;
  for (let next = inbox.pending.shift(); next; next = inbox.pending.shift()) {
    // A work item's resolution carries the identity of the item's own Update (work_resolution).
    const requester =
      'ref' in next ? await requesterOf(next.signal.name, next.ref, 'payload' in next ? next.payload : null) : null;
    const fromSeq = loop.ledger.nextSeq;
    const done = await handleSignal(loop, next, requester);
    stampRequester(loop.ledger.entries, fromSeq, requester);
    await flushLedger(loop);
    if (next.reply && next.reply.error === undefined)
      next.reply.result = replyOf(loop.ledger.entries, fromSeq, loop.lastDecision!, inbox.supersededBy);
    if (done) return true;
  }
  return false;
}

async function handleSignal(loop: Signalled, pending: Pending, requester: RequesterNote | null): Promise<boolean> {
  if ('hold' in pending) {
    if (pending.hold === 'hold') holdNow(loop, pending.payload, requester, pending.reply);
    else unholdNow(loop, pending.payload, pending.reply);
    return false;
  }
  if ('rejected' in pending) {
    rejectSignal(loop, recheckSignal.name, pending.rejected, pending.rejected);
    return false;
  }
  if (pending.signal === resolveConflictSignal) {
    await resolveConflict(loop, pending.payload, requester, pending.reply ?? {});
    return false;
  }
  if (pending.signal === loopResolveWorkUpdate) {
    await resolveWork(loop, pending.payload, pending.reply ?? {});
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

async function resolveConflict(loop: Signalled, payload: unknown, requester: RequesterNote | null, reply: Reply): Promise<void> {
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
  const kept = await agentKeeps(loop, v.resource_key, v.resolution, v.by, v.note ?? null, v.operator ?? null);
  const author = kept.author ?? { proof: 'declared' as const, by: v.by, identity: requester?.identity ?? null };
  if (kept.refused) {
    reply.error = `resolveConflict refused by ${loop.node}: ${kept.refused}`;
    return rejectSignal(
      loop,
      name,
      reply.error,
      `${v.by}'s ${v.resolution} of "${v.resource_key}" was refused by ${loop.node}: ${kept.refused}`,
    );
  }
  loop.history = resolved.history;
  note(loop, {
    reason: 'OPERATOR_RESOLUTION_RECORDED',
    detail: `${v.by} resolved the conflict on "${v.resource_key}" by ${v.resolution}${v.note ? ` (${v.note})` : ''}${provenBy(author)}; it closes when a fresh observation confirms it.`,
    trigger: PASS_FOLLOWS_NOW,
    // On the note, so the ledger store's copy of the decision changes with the agent's, not at
    // the next pass entry (which may never come before a hand-over). Only a new field of the
    // entry the local activity already receives: no new command, so no patch.
    resolution: kept.request,
    author,
  });
  loop.inbox.recheckRequested = true;
}

const provenBy = (author: DecisionAuthor) => (author.proof === 'proven' ? `, signed with operator key ${author.key}` : '');

/**
 * The agent keeps a conflict's resolution (the yield, or the end of the conflict on a retake)
 * before the pass that follows acts. A host that requires signatures refuses an unsigned retake
 * (UntrustedDecision): then nothing of the resolution is kept, and the refusal is recorded.
 */
async function agentKeeps(
  loop: Signalled,
  key: string,
  kind: 'retake' | 'yield',
  by: string,
  why: string | null,
  operator: OperatorSignature | null,
): Promise<{ request: ResolutionRequest | null; author: DecisionAuthor | null; refused: string | null }> {
  const request = decisionRequest(loop.intent, key, { kind, by, at: nowIso(), note: why });
  if (!request) return { request: null, author: null, refused: null };
  // The signature goes to the agent only: the ledger keeps the key that signed, not the signature.
  const [answer] = await recordDecisions(loop, [operator ? { ...request, operator } : request]);
  const refused =
    answer && 'refused' in answer && answer.type === UNTRUSTED_DECISION ? `${answer.type}: ${answer.refused}` : null;
  // Only a proof is the agent's to give; a declared author is the one the loop saw declared.
  const author = answer && 'author' in answer && answer.author?.proof === 'proven' ? answer.author : null;
  return { request: { ...request, kind }, author, refused };
}

const UNTRUSTED_DECISION: RefusalType = 'UntrustedDecision';
type ResolutionRequest = RecordDecisionRequest & { kind: 'retake' | 'yield' };

/**
 * A work item's resolution, judged on what the loop holds now (the validator's judgement, and
 * again when the loop handles it: its history may have moved between the two). Refused: an error
 * naming why, and nothing recorded. The validator also refuses it after a hand-over.
 */
function judgeWork(loop: Signalled, payload: unknown, validating: boolean) {
  if (validating) checkNotHandedOver(loop.inbox.supersededBy);
  const parsed = parseLoopResolution(payload);
  if (!parsed.ok) return refuseWork(parsed.error, validating);
  // In the validator only: a refused Update leaves nothing in history, so runs recorded before
  // this check replay as they were, and every new Update meets it.
  const foreign = validating ? foreignItem(loop.node, parsed.value) : null;
  if (foreign) return refuseWork(`resolveWork rejected: ${foreign}`, validating);
  const resolution = parsed.value;
  if (!isLoopResolution(resolution))
    return refuseWork(
      `resolveWork rejected: ${resolution.condition} is the fleet's condition, resolved through the fleet workflow`,
      validating,
    );
  const judged = judgeLoopResolution(loop.history, loop.intent, loop.lastDecision, resolution, nowIso());
  if (judged.error) return refuseWork(`resolveWork rejected: ${judged.error}`, validating);
  return { resolution, judged };
}

function refuseWork(error: string, validating: boolean): { error: string } {
  if (validating) throw new Error(error);
  return { error };
}

/**
 * Carries out a work item's resolution and records it (OPERATOR_RESOLUTION_RECORDED, with
 * work_resolution: the item, the resolution, the declared name, the identity Temporal recorded
 * for the item's Update, the note). A resolution that is to clear the condition is followed by
 * a pass at once; only that pass's observation, reported to the item, closes it.
 */
async function resolveWork(loop: Signalled, payload: unknown, reply: Reply): Promise<void> {
  const verdict = judgeWork(loop, payload, false);
  if ('error' in verdict) return void (reply.error = verdict.error);
  const { resolution: r, judged } = verdict;
  if (r.resolution === 'rebind') {
    const refused = await rebindToAuthority(loop);
    if (refused) return void (reply.error = `resolveWork rejected: ${refused}`);
  }
  const { operator, ...work } = r;
  const kept =
    (r.resolution === 'retake' || r.resolution === 'yield') && r.resource_key
      ? await agentKeeps(loop, r.resource_key, r.resolution, r.by, r.note, operator ?? null)
      : null;
  const author = kept?.author ?? { proof: 'declared' as const, by: r.by, identity: r.identity };
  if (kept?.refused) {
    reply.error = `resolveWork refused by ${loop.node}: ${kept.refused}`;
    return note(loop, {
      reason: 'SIGNAL_REJECTED',
      detail: `${r.by}'s ${r.resolution} of ${r.item_id} was refused by ${loop.node}: ${kept.refused}`,
      work,
      author,
    });
  }
  loop.history = judged.history;
  const clears = ruleOf(r.condition, r.resolution)?.expects === 'cleared';
  note(loop, {
    reason: 'OPERATOR_RESOLUTION_RECORDED',
    detail: `${judged.detail}${provenBy(author)}`,
    ...(clears ? { trigger: PASS_FOLLOWS_NOW } : {}),
    resolution: kept?.request ?? null,
    work,
    author,
  });
  if (clears) loop.inbox.recheckRequested = true;
}

/** rebind: this generation re-bound to the authority's current content, as `datum refresh` does; else why not. */
async function rebindToAuthority(loop: Signalled): Promise<string | null> {
  const read = await readAuthority(loop.node);
  if (!read.ok) return read.error;
  if (read.intent.generation !== loop.intent.generation)
    return withFix(
      `the authority for ${loop.node} is at generation ${read.intent.generation} now, not ${loop.intent.generation}`,
      `roll generation ${read.intent.generation} out (datum rollout start --generation ${read.intent.generation}); it takes the node over`,
    );
  rebind(loop, read.intent);
  return null;
}

function rebind(loop: Signalled, intent: BoundIntent): void {
  loop.intent = intent;
  loop.agents = nodeAgents(loop.node, intent, loop.agentPatches);
  watchEvent(loop, { kind: 'rebound' });
  rebindAttributes(loop.attributes, intent);
}

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
    rebind(loop, read.intent);
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
      // The node's shard, which this loop runs in: the queue a rollout would have chosen for it.
      taskQueue: workflowInfo().taskQueue,
      args: [{ node, generation: target.generation }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: handOverAttributes(node, target),
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
  return workflowId;
}
