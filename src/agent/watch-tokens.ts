import { promises as fs } from 'node:fs';
import { AsyncCompletionClient, type ConnectionLike } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import type { Context } from '@temporalio/activity';
import type { WatchResult } from '../contract';
import { readJsonAt, sha256, writeJsonAt } from './fsx';
import { inDatumDir } from './paths';

/*
 * The agent announces itself when it starts again. A watch beats rarely (its heartbeat timeout is
 * five minutes, src/workflows/agents.ts), so a watch whose agent was killed would leave its loop
 * unwatched for up to five minutes before the server timed it out. Instead, every watch that
 * waits keeps its task token under <root>/.datum/watches/ while it runs, and an agent starting
 * on that root ends each one it finds there, as finished with no change: the loop then starts the
 * next watch at once (src/domain/watch.ts, "ended"), which compares with the loop's last
 * observation, so an edit made while no agent ran is still reported.
 *
 * An agent that never comes back announces nothing: then the heartbeat timeout is the bound.
 */

const SUB = 'watches';

interface KeptWatch {
  task_token: string;
  workflow_id: string;
  activity_id: string;
  started_at: string;
  pid: number;
}

/**
 * Keeps the running watch's task token on the node; the returned function forgets it (call it
 * when the watch ends). Where it cannot be kept, the watch still runs, bounded by its timeout.
 */
export async function keepWatch(root: string, ctx: Context): Promise<() => Promise<void>> {
  const token = Buffer.from(ctx.info.taskToken);
  const name = `${sha256(token).slice(0, 32)}.json`;
  const kept: KeptWatch = {
    task_token: token.toString('base64'),
    workflow_id: ctx.info.workflowExecution?.workflowId ?? '',
    activity_id: ctx.info.activityId,
    started_at: new Date().toISOString(),
    pid: process.pid,
  };
  try {
    await inDatumDir(root, SUB, true, (dir) => writeJsonAt(dir, name, kept), undefined);
  } catch (err) {
    ctx.log.warn('watch: its task token could not be kept; should this agent die, its loop waits out the heartbeat timeout', {
      error: (err as Error).message,
    });
    return () => Promise.resolve();
  }
  return async () => {
    await inDatumDir(root, SUB, false, (dir) => fs.rm(dir.at(name), { force: true }), undefined).catch(() => undefined);
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
 * Ends every watch a previous agent process on `root` left running (call before this process
 * takes work, so none of its own is among them), and forgets them all.
 */
export async function endOrphanedWatches(
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
        if (name.endsWith('.json')) found.push({ name, watch: await readJsonAt(dir, name) });
      return found;
    },
    [],
  );
  if (kept.length === 0) return [];
  const client = new AsyncCompletionClient({ connection, namespace, ...(dataConverter ? { dataConverter } : {}) });
  const ends: OrphanEnd[] = [];
  for (const { name, watch } of kept) {
    const w = watch as Partial<KeptWatch> | null;
    if (typeof w?.task_token === 'string') {
      const outcome = await client.complete(Buffer.from(w.task_token, 'base64'), ENDED_BY_RESTART()).then(
        () => 'ended',
        (err: unknown) => (err as Error).message,
      );
      ends.push({ workflow_id: String(w.workflow_id), outcome });
    }
    await inDatumDir(root, SUB, false, (dir) => fs.rm(dir.at(name), { force: true }), undefined);
  }
  return ends;
}
