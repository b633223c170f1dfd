/*
 * resolveConflict and refreshDesired as Temporal Updates (src/contract/signals.ts). The loop
 * handles an Update exactly as the signal of the same name, in the same queue and order; the
 * Update's handler only waits for the loop to answer it once the decision is recorded.
 */
import { ApplicationFailure, condition } from '@temporalio/workflow';
import { parseSignal, type Decision, type LedgerEntry } from '../domain';
import { withFix, type OperatorUpdateResult, type SignalName } from '../contract';

/** Filled in by the loop once it has recorded (and flushed) the decision an Update led to. */
export interface Reply {
  result?: OperatorUpdateResult;
  /** The loop will not handle it (it handed the node over first). */
  error?: string;
}

/** The Update handler: waits for the loop's answer. */
export async function awaitReply(reply: Reply): Promise<OperatorUpdateResult> {
  await condition(() => reply.result !== undefined || reply.error !== undefined);
  if (reply.error !== undefined) throw ApplicationFailure.nonRetryable(reply.error, 'UpdateNotHandled');
  return reply.result!;
}

/** The validator's part that needs no loop: the payload as the signal's schema and caps judge it. */
export function checkPayload(name: SignalName, payload: unknown): void {
  const parsed = parseSignal(name, payload);
  if (!parsed.ok) throw new Error(parsed.error);
}

/** A loop that has handed over takes no more Updates: the caller is told where the node went. */
export function checkNotHandedOver(supersededBy: string | null): void {
  if (supersededBy !== null)
    throw new Error(withFix(`this loop handed the node over to ${supersededBy}`, `send it to ${supersededBy}`));
}

/** What the loop answers: the entry recorded from `fromSeq` on (the decision's), or none when it repeated the last one. */
export function replyOf(
  ledger: LedgerEntry[],
  fromSeq: number,
  decision: Decision,
  handedOverTo: string | null,
): OperatorUpdateResult {
  const entry = [...ledger].reverse().find((e) => e.seq >= fromSeq) ?? null;
  return { entry, decision, handed_over_to: handedOverTo };
}

/** Updates still queued when the loop ends: each is told it was not handled, and where to send it. */
export function refuseQueued(replies: Array<Reply | undefined>, supersededBy: string | null): void {
  for (const reply of replies) {
    if (!reply || reply.result || reply.error) continue;
    reply.error = withFix(
      `the loop handed the node over${supersededBy ? ` to ${supersededBy}` : ''} before it handled this update`,
      supersededBy ? `send it to ${supersededBy}` : 'send it again to the loop that owns the node now',
    );
  }
}
