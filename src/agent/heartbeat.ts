import { asyncLocalStorage } from '@temporalio/activity';

/*
 * How the agent's activities tell the server they are alive. With the workflow's heartbeatTimeout
 * (30 s), a task whose worker died or whose completion the server lost is retried within that
 * timeout, not at start-to-close (ten minutes for an apply). Heartbeats also carry the watch's
 * cancellation. Outside an activity (an operator's clean-up, a provider called directly) nothing
 * beats.
 *
 * Every beat the SDK sends is a RecordActivityTaskHeartbeat, which the server persists (an
 * UpdateWorkflowExecution), and the SDK sends an activity's first beat at once. Most observes and
 * applies finish in milliseconds, long before any timeout could need a beat, so the first beat
 * waits one interval: the server's clock for the timeout starts when the task starts, so a task
 * that finishes within BEAT_MS never beats (no write), and one that runs longer beats long before
 * the 30 s timeout.
 */

/** How often a running observe or apply beats; its first beat comes after one interval. */
export const BEAT_MS = 5000;
/**
 * How often a watch hands the SDK a beat. Its beats say that its poll loop still turns and carry
 * its cancellation; the SDK sends the first at once and then at most one every 4 minutes (0.8 ×
 * the watch's 5 m heartbeat timeout, capped by the agent's maxHeartbeatThrottleInterval), so
 * beating more often only crosses into the SDK for nothing. The watch beats on a turn of its poll
 * loop: 14 s is just under its 15 s safety poll (SAFETY_POLL_MS in watch.ts), so every such turn
 * beats, and the first beat reaches the server 14 s into a watch.
 */
export const WATCH_BEAT_MS = 14_000;

/** Runs `work` while beating every BEAT_MS from a timer (first after BEAT_MS): for observe and apply. */
export function whileBeating<T>(work: () => Promise<T>): Promise<T> {
  return beatingOnceAdmitted((admitted) => {
    admitted();
    return work();
  });
}

/**
 * For work that first waits its turn (the agent's gate, src/agent/gate.ts): `run` calls
 * `admitted` when the work itself starts, and from then on it beats as whileBeating does. While it
 * waits it beats only when its silence would otherwise come within two intervals of the
 * activity's heartbeat timeout (at 20 s of a 30 s one), so that a wait is not taken for a lost
 * task: at 1000 nodes most of an agent's tasks wait, and most waits end before that, with no
 * server write. A wait's cancellation is the gate's (its signal), and needs no beat.
 */
export async function beatingOnceAdmitted<T>(run: (admitted: () => void) => Promise<T>): Promise<T> {
  const ctx = asyncLocalStorage.getStore();
  if (!ctx) return run(() => undefined);
  const beat = () => ctx.heartbeat();
  const quietMs = (ctx.info.heartbeatTimeoutMs ?? 0) - 2 * BEAT_MS;
  const waiting = quietMs > 0 ? setInterval(beat, quietMs) : undefined;
  let working: ReturnType<typeof setInterval> | undefined;
  try {
    return await run(() => {
      clearInterval(waiting);
      working ??= setInterval(beat, BEAT_MS);
    });
  } finally {
    clearInterval(waiting);
    clearInterval(working);
  }
}

/**
 * A beat for a loop to call on every turn, sent at most every `everyMs` and first `everyMs` after
 * the loop starts: for the watch, whose beats then also say that its poll loop still turns.
 */
export function loopHeartbeat(everyMs = WATCH_BEAT_MS): () => void {
  const ctx = asyncLocalStorage.getStore();
  let last = Date.now();
  return () => {
    if (ctx && Date.now() - last >= everyMs) {
      ctx.heartbeat();
      last = Date.now();
    }
  };
}
