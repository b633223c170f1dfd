import { asyncLocalStorage } from '@temporalio/activity';

/*
 * How the agent's activities tell the server they are alive. With the workflow's heartbeatTimeout
 * (30 s), a task whose worker died or whose completion the server lost is retried within that
 * timeout, not at start-to-close (ten minutes for an apply): at 1000 nodes on one SQLite dev
 * server, completions were lost. Heartbeats also carry the watch's cancellation. Outside an
 * activity (an operator's clean-up, a provider called directly) nothing beats.
 */

/** How often a running observe, apply or watch beats. */
export const BEAT_MS = 5000;

/** Runs `work` while beating every BEAT_MS from a timer: for observe and apply. */
export async function whileBeating<T>(work: () => Promise<T>): Promise<T> {
  const ctx = asyncLocalStorage.getStore();
  if (!ctx) return work();
  ctx.heartbeat();
  const timer = setInterval(() => ctx.heartbeat(), BEAT_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

/**
 * A beat for a loop to call on every turn, sent at most every BEAT_MS: for the watch, whose
 * beats then also say that its poll loop still turns.
 */
export function loopHeartbeat(): () => void {
  const ctx = asyncLocalStorage.getStore();
  let last = 0;
  return () => {
    if (ctx && Date.now() - last >= BEAT_MS) {
      ctx.heartbeat();
      last = Date.now();
    }
  };
}
