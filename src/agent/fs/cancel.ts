import { asyncLocalStorage } from '@temporalio/activity';

/*
 * Long work on node-controlled data (hashing, reading, copying, unpacking) checks between chunks
 * whether its activity's attempt is over: cancelled, timed out, or abandoned by the server (the
 * agent learns it from the answer to a heartbeat). Then it stops: an abandoned attempt's work must
 * not go on hashing a terabyte after the gate freed its slot (src/agent/gate.ts). Outside an
 * activity (a provider called directly, an operator's command) nothing is ever cancelled.
 */

/** Throws the attempt's cancellation once it is over; call it between chunks of long work. */
export function checkpoint(): void {
  const signal = asyncLocalStorage.getStore()?.cancellationSignal;
  if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('the activity was cancelled');
}
