/*
 * Holds (`datum hold`, `datum unhold`; src/domain/holds.ts) and `datum reconcile` on the loop. A
 * hold and an unhold queue as Updates and are handled between passes, like resolveConflict; each
 * writes a note, and the pass that follows shows the node as the hold leaves it. A hold whose
 * `until` passes ends by itself at the start of the next iteration (the loop wakes for it).
 * Whether a run takes holds at all is the node-holds patch, asked as the run starts.
 */
import { proxyLocalActivities, log } from '@temporalio/workflow';
import { holdInForce, holdWords, liftHold, parseHold, parseUnhold, placeHold, type NodeHold } from '../domain';
import { withFix, type ControlActivities, type PassCount, type ReconcileAccepted, type RequesterNote } from '../contract';
import { PASS_FOLLOWS_NOW, note, nowIso, type Recorder } from './ledger';
import { summaryLine } from './summaries';
import { checkNotHandedOver, type Reply } from './updates';

/** The part of the loop holds and `datum reconcile` read and move. */
export interface Holdable extends Recorder {
  readonly inbox: { supersededBy: string | null; recheckRequested: boolean };
  /** The node-holds patch is in force for this run. */
  readonly holdsLive: boolean;
  readonly passes: PassCount;
}

/** The hold or unhold Update's validator: refused before anything is recorded. */
export function validateHold(loop: Holdable, kind: 'hold' | 'unhold', payload: unknown): void {
  checkNotHandedOver(loop.inbox.supersededBy);
  if (!loop.holdsLive)
    throw new Error(
      withFix(
        `this run of ${loop.workflowId} began before holds existed and cannot take one`,
        'wait for the loop to continue as new (it does within hours), or hold the node by agent.yaml (reconciliation.mode: observe) on the node',
      ),
    );
  const parsed = kind === 'hold' ? parseHold(payload, nowIso()) : parseUnhold(payload);
  if (!parsed.ok) throw new Error(parsed.error);
  if (kind === 'unhold' && !holdInForce(loop.history.hold, nowIso()))
    throw new Error(withFix(`${loop.node} is not held`, '`datum status` and `datum nodes` show the held nodes'));
}

/** Places the hold the Update asked for, and records it (HOLD_PLACED); the pass that follows shows what it holds. */
export function holdNow(loop: Holdable, payload: unknown, requester: RequesterNote | null, reply: Reply): void {
  const parsed = parseHold(payload, nowIso());
  if (!parsed.ok) return void (reply.error = parsed.error);
  const v = parsed.value;
  const hold: NodeHold = { by: v.by, reason: v.reason, since: nowIso(), until: v.until, identity: requester?.identity ?? null };
  loop.history = placeHold(loop.history, hold);
  note(loop, {
    reason: 'HOLD_PLACED',
    detail: `${v.by} held ${loop.node}${v.until ? ` until ${v.until}` : ''} (${v.reason}): repairs stop; observing and reporting go on, and drift is reported with its plan, not applied.`,
    trigger: PASS_FOLLOWS_NOW,
  });
  loop.inbox.recheckRequested = true;
}

/** Ends the hold the Update names, and records it (HOLD_LIFTED); the pass that follows repairs. */
export function unholdNow(loop: Holdable, payload: unknown, reply: Reply): void {
  const parsed = parseUnhold(payload);
  const hold = holdInForce(loop.history.hold, nowIso());
  if (!parsed.ok) return void (reply.error = parsed.error);
  if (!hold) return void (reply.error = withFix(`${loop.node} is not held`, 'nothing to end'));
  const v = parsed.value;
  lift(
    loop,
    `${v.by} ended the hold: ${loop.node} was ${holdWords(hold)}${v.note ? `; ${v.note}` : ''}. The pass that follows repairs what it finds.`,
  );
}

/** A hold whose `until` has passed ends now, recorded, before anything else the loop does. */
export function endHoldAtItsTime(loop: Holdable): void {
  const hold = loop.history.hold;
  if (!hold || holdInForce(hold, nowIso())) return;
  lift(loop, `The hold ended at its time: ${loop.node} was ${holdWords(hold)}. The pass that follows repairs what it finds.`);
}

function lift(loop: Holdable, detail: string): void {
  loop.history = liftHold(loop.history);
  note(loop, { reason: 'HOLD_LIFTED', detail, trigger: PASS_FOLLOWS_NOW });
  loop.inbox.recheckRequested = true;
}

/** When the hold ends by itself, for the wait between passes; null: it does not. */
export function holdEndsAt(loop: Holdable): number | null {
  const until = loop.history.hold?.until;
  return until ? Date.parse(until) : null;
}

/** `datum reconcile`'s Update: a pass is owed now; the answer says which pass will be the one. */
export function reconcileNow(loop: Holdable): ReconcileAccepted {
  loop.inbox.recheckRequested = true;
  return { workflow_id: loop.workflowId, passes: { ...loop.passes }, last_seq: loop.ledger.nextSeq - 1 };
}

const store = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', maximumInterval: '10s', maximumAttempts: 5 },
});

/**
 * The hold a new run chain starts with: the one the node's last stored entry carries (a loop of an
 * earlier generation held it), if it is still in force. A store that cannot answer: none.
 */
export async function storedHold(node: string): Promise<NodeHold | null> {
  try {
    const hold = await store.storedHold.executeWithOptions({ summary: summaryLine(`stored hold ${node}`) }, [node]);
    return holdInForce(hold, nowIso());
  } catch (error) {
    log.warn('the ledger store did not answer for a stored hold; the loop starts unheld', { node, error: String(error) });
    return null;
  }
}
