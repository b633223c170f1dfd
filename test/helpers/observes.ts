import { tsToMs } from '@temporalio/common/lib/time';
import type { Client } from '@temporalio/client';

/**
 * When each observe of a loop ended (epoch ms), from its history: those that completed, or those
 * that timed out (no agent took the task within node_timeout, or it did not come back in time).
 */
export async function observesEnded(client: Client, workflowId: string, how: 'completed' | 'timed out'): Promise<number[]> {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const observes = new Set(
    events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'observe').map((e) => String(e.eventId)),
  );
  const scheduled = (e: (typeof events)[number]) =>
    how === 'completed'
      ? e.activityTaskCompletedEventAttributes?.scheduledEventId
      : e.activityTaskTimedOutEventAttributes?.scheduledEventId;
  return events.filter((e) => observes.has(String(scheduled(e)))).map((e) => tsToMs(e.eventTime));
}
