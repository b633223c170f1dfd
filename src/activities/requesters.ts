import { log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { SignalRef } from '../contract';

/*
 * Who sent a signal, as Temporal recorded it. The SDK does not hand a signal's sender to workflow
 * code (the core's activation carries it, the TypeScript handler does not receive it), so the
 * loop asks after the fact: the server keeps the sending client's `identity` on the
 * WorkflowExecutionSignaled event, and the loop names the event by the order its handler saw it in.
 */

export function createRequesterActivities(client: () => Client) {
  return {
    signalRequester: (ref: SignalRef): Promise<string | null> => signalRequesterOf(client(), ref),
  };
}

/** The identity on the `ordinal`-th WorkflowExecutionSignaled event of `signal_name` in the run, or null. */
export async function signalRequesterOf(client: Client, ref: SignalRef): Promise<string | null> {
  const history = await client.workflow.getHandle(ref.workflow_id, ref.run_id).fetchHistory();
  let seen = 0;
  for (const event of history.events ?? []) {
    const signaled = event.workflowExecutionSignaledEventAttributes;
    if (signaled?.signalName !== ref.signal_name) continue;
    if (++seen === ref.ordinal) return signaled.identity || null;
  }
  log.warn('the signal is not in the workflow history; its identity stays unknown', { ...ref });
  return null;
}
