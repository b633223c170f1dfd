import { asyncLocalStorage } from '@temporalio/activity';

/**
 * Heartbeats while a long apply waits (a service's graceful stop, its health check), but only
 * when the activity was scheduled with a heartbeat timeout: the SDK asks activities not to
 * heartbeat otherwise. Outside an activity (an operator's clean-up) it does nothing.
 */
export function heartbeat(details?: unknown): void {
  const ctx = asyncLocalStorage.getStore();
  if (ctx?.info.heartbeatTimeoutMs) ctx.heartbeat(details);
}
