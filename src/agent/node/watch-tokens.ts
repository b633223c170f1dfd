import { AsyncCompletionClient, type ConnectionLike } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import type { Context } from '@temporalio/activity';
import { reconcileWorkflowId, type WatchResult } from '../../contract';
import { readJsonAt, sha256, writeJsonAt, inDatumDir } from '../fs';
import { limits } from '../limits';

/*
 * The agent announces itself when it starts again. A watch beats rarely (its heartbeat timeout is
 * five minutes, src/workflows/agents.ts), so a watch whose agent was killed would leave its loop
 * unwatched for up to five minutes before the server timed it out. Instead, every watch that
 * waits keeps its ids (workflow, run, activity) under <root>/.datum/watches/ while it runs, and an
 * agent starting on that root ends each one it finds there, as finished with no change: the loop
 * then starts the next watch at once (src/domain/watch.ts, "ended"), which compares with the
 * loop's last observation, so an edit made while no agent ran is still reported.
 *
 * Ids, not the task token: a token is a bearer credential for any activity, and a local writer
 * inside the root could leave one there. An id is ended only if it names a watch still pending
 * in a loop of this node; anything else found there is forgotten, not acted on.
 *
 * An agent that never comes back announces nothing: then the heartbeat timeout is the bound.
 */

const SUB = 'watches';

interface KeptWatch {
  workflow_id: string;
  run_id: string;
  activity_id: string;
  started_at: string;
  pid: number;
}

/**
 * Keeps the running watch's ids on the node; the returned function forgets them (call it when the
 * watch ends). Where they cannot be kept, the watch still runs, bounded by its timeout.
 */
export async function keepWatch(root: string, ctx: Context): Promise<() => Promise<void>> {
  const name = `${sha256(Buffer.from(ctx.info.taskToken)).slice(0, 32)}.json`;
  const kept: KeptWatch = {
    workflow_id: ctx.info.workflowExecution?.workflowId ?? '',
    run_id: ctx.info.workflowExecution?.runId ?? '',
    activity_id: ctx.info.activityId,
    started_at: new Date().toISOString(),
    pid: process.pid,
  };
  try {
    await inDatumDir(root, SUB, true, (dir) => writeJsonAt(dir, name, kept), undefined);
  } catch (err) {
    ctx.log.warn('watch: its ids could not be kept; should this agent die, its loop waits out the heartbeat timeout', {
      error: (err as Error).message,
    });
    return () => Promise.resolve();
  }
  return async () => {
    await inDatumDir(root, SUB, false, (dir) => dir.remove(name), undefined).catch(() => undefined);
  };
}

/** What a watch its agent never finished returns: nothing seen, and why. */
const ENDED_BY_RESTART = (): WatchResult => ({ changed: [], at: new Date().toISOString(), reason: 'agent restarted' });

export interface OrphanEnd {
  workflow_id: string;
  /** 'ended': the loop starts its next watch. Otherwise why not (gone already: timed out, or its loop ended). */
  outcome: string;
}

/**
 * Ends every watch of a loop of `node` that a previous agent process on `root` left running (call
 * before this process takes work, so none of its own is among them), and forgets them all.
 */
export async function endOrphanedWatches(
  node: string,
  root: string,
  connection: ConnectionLike,
  namespace: string,
  dataConverter: DataConverter | undefined,
): Promise<OrphanEnd[]> {
  const kept = await inDatumDir(
    root,
    SUB,
    false,
    async (dir) => {
      const found: Array<{ name: string; watch: unknown }> = [];
      for (const name of await dir.entries())
        if (name.endsWith('.json')) found.push({ name, watch: await readJsonAt(dir, name, limits.smallRecordBytes) });
      return found;
    },
    [],
  );
  if (kept.length === 0) return [];
  const client = new AsyncCompletionClient({ connection, namespace, ...(dataConverter ? { dataConverter } : {}) });
  const ends: OrphanEnd[] = [];
  for (const { name, watch } of kept) {
    const w = watch as Partial<KeptWatch> | null;
    const id = { workflowId: String(w?.workflow_id), runId: String(w?.run_id), activityId: String(w?.activity_id) };
    const outcome = await endIfOurs(client, namespace, node, id);
    ends.push({ workflow_id: id.workflowId, outcome });
    await inDatumDir(root, SUB, false, (dir) => dir.remove(name), undefined);
  }
  return ends;
}

/** Completes the activity `id` as a watch ended by a restart, if it is a watch still pending in a loop of `node`. */
async function endIfOurs(
  client: AsyncCompletionClient,
  namespace: string,
  node: string,
  id: { workflowId: string; runId: string; activityId: string },
): Promise<string> {
  const generation = Number(/(\d+)$/.exec(id.workflowId)?.[1]);
  if (reconcileWorkflowId(node, generation) !== id.workflowId) return `not a loop of ${node}: left alone`;
  try {
    const described = await client.workflowService.describeWorkflowExecution({
      namespace,
      execution: { workflowId: id.workflowId, runId: id.runId },
    });
    const pending = (described.pendingActivities ?? []).find((a) => a.activityId === id.activityId);
    if (pending?.activityType?.name !== 'watch') return 'no longer pending (timed out, or its loop ended)';
    await client.complete(id, ENDED_BY_RESTART());
    return 'ended';
  } catch (err) {
    return (err as Error).message;
  }
}
