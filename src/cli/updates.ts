import { WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import { withFix, type OperatorUpdateResult } from '../contract';
import type { NodeLoop } from './nodes';

/** An Update the loop did not record in time: it may still be applied when a controller worker runs. */
export class NotRecordedError extends Error {
  override readonly name = 'NotRecordedError';
}

/** The workflow's validator refused the Update: nothing was recorded, the message says why. */
export class UpdateRejectedError extends Error {
  override readonly name = 'UpdateRejectedError';
}

/** An operator's Update of the loop that answers with the entry it recorded (resolveConflict, refreshDesired, hold, unhold). */
export type OperatorUpdate<P> = UpdateDefinition<OperatorUpdateResult, [P], string>;

/**
 * Sends an Update and waits, at most `timeoutMs`, for the loop to record its decision. A refusal
 * by the workflow's validator is an UpdateRejectedError; silence (no controller worker, a loop
 * busy in a long pass) a NotRecordedError that says so.
 */
export async function sendUpdate<P>(
  loop: NodeLoop,
  update: OperatorUpdate<P>,
  payload: P,
  timeoutMs: number,
): Promise<OperatorUpdateResult> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(notRecorded(loop, update.name, timeoutMs)), timeoutMs);
  });
  try {
    return await Promise.race([loop.handle.executeUpdate(update, { args: [payload] }), late]);
  } catch (error) {
    if (error instanceof WorkflowUpdateFailedError)
      throw new UpdateRejectedError(`${update.name} refused by ${loop.workflowId}: ${causeOf(error)}`);
    if (error instanceof WorkflowUpdateRPCTimeoutOrCancelledError) throw notRecorded(loop, update.name, timeoutMs);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

function causeOf(error: WorkflowUpdateFailedError): string {
  const cause = error.cause as { message?: string } | undefined;
  return cause?.message ?? error.message;
}

function notRecorded(loop: NodeLoop, name: string, timeoutMs: number): NotRecordedError {
  return new NotRecordedError(
    withFix(
      `${loop.workflowId} has not recorded the ${name} update within ${Math.round(timeoutMs / 1000)} s; it may still be applied when the loop gets to it`,
      'check that a controller worker runs (`datum worker`), then `datum describe` the node, or pass a longer --timeout',
    ),
  );
}
