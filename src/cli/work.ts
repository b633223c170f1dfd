/*
 * What the `datum work` commands share: finding work items in visibility, reading one, and
 * sending its Updates with the refusal or the silence turned into a message with its fix.
 */
import {
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
  type Client,
  type WorkflowExecutionInfo,
} from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import {
  DatumNode,
  DatumStatus,
  MEMO_SUMMARY,
  withFix,
  workItemQuery,
  workQuery,
  type WorkEpisode,
  type WorkFilter,
  type WorkItem,
} from '../contract';
import { UsageError } from './args';

export type { WorkFilter } from '../contract';

/** A work item as visibility lists it: no query, no worker needed. */
export interface WorkRow {
  id: string;
  node: string;
  condition: string;
  resource_key: string | null;
  state: string;
  opened_at: string;
  summary: string | null;
}

const ID = /^datum-work\/([^/]+)\/([A-Z_]+)(?:\/([^/]+))?$/;

function rowOf(w: WorkflowExecutionInfo): WorkRow | null {
  const m = ID.exec(w.workflowId);
  if (!m) return null;
  const summary = w.memo?.[MEMO_SUMMARY];
  return {
    id: w.workflowId,
    node: w.typedSearchAttributes.get(DatumNode) ?? m[1],
    condition: m[2],
    resource_key: m[3] ?? null,
    state: w.typedSearchAttributes.get(DatumStatus) ?? 'OPEN',
    opened_at: w.startTime.toISOString(),
    summary: typeof summary === 'string' ? summary : null,
  };
}

/** Every open work item the filter matches, oldest first. */
export async function listWork(client: Client, filter: WorkFilter = {}): Promise<WorkRow[]> {
  const rows: WorkRow[] = [];
  for await (const w of client.workflow.list({ query: workQuery(filter), pageSize: 1000 })) {
    const row = rowOf(w);
    if (row) rows.push(row);
  }
  return rows.sort((a, b) => a.opened_at.localeCompare(b.opened_at) || a.id.localeCompare(b.id));
}

/** A work item id as `datum work list` prints it: datum-work/NODE/CONDITION[/RESOURCE]. */
export function checkItemId(id: string | undefined): string {
  if (!id || !ID.test(id))
    throw new UsageError(
      withFix(
        `${JSON.stringify(id ?? null)} is not a work item id`,
        'give the id `datum work list` prints, such as datum-work/N-24/CONFLICTING_WRITER/config',
      ),
    );
  return id;
}

/** The item as its workflow knows it: the open item by query, a closed one by its result. */
export async function readItem(client: Client, id: string): Promise<WorkItem> {
  return (await readItemRun(client, id)).item;
}

/** The item and the run that holds it: a resolution is sent to the run it was read from, never a later one. */
export async function readItemRun(client: Client, id: string): Promise<{ item: WorkItem; runId: string }> {
  const handle = client.workflow.getHandle(id);
  try {
    const { status, runId } = await handle.describe();
    const run = client.workflow.getHandle(id, runId);
    const item = status.name === 'RUNNING' ? await run.query(workItemQuery) : ((await run.result()) as WorkItem);
    return { item, runId };
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) throw notFound(id);
    throw error;
  }
}

/** An episode as `datum work claim` and `show` print it, and `resolve --episode` takes it: run/opened_at/reopened/facts. */
export const episodeToken = (e: WorkEpisode): string => [e.run_id, e.opened_at, e.reopened, e.facts ?? '-'].join('/');

export function parseEpisodeToken(token: string): WorkEpisode {
  const [runId, openedAt, reopened, facts, ...rest] = token.split('/');
  if (
    !runId ||
    !openedAt ||
    !/^\d+$/.test(reopened ?? '') ||
    !facts ||
    rest.length > 0 ||
    !(facts === '-' || /^[0-9a-f]{16}$/.test(facts))
  )
    throw new UsageError(
      withFix(
        `--episode ${JSON.stringify(token)} is not an episode`,
        'give the episode `datum work claim` or `datum work show` printed for the item',
      ),
    );
  return { run_id: runId, opened_at: openedAt, reopened: Number(reopened), facts: facts === '-' ? null : facts };
}

const notFound = (id: string) =>
  new Error(withFix(`there is no work item ${id}`, '`datum work list` lists the open ones (the id is case-sensitive)'));

/**
 * Sends one of the item's Updates and waits at most `timeoutMs`. The item's refusal (its
 * validator: nothing was recorded) is printed as the item said it; silence says what to check.
 */
export async function sendWorkUpdate<Ret, Arg>(
  client: Client,
  id: string,
  update: UpdateDefinition<Ret, [Arg], string>,
  payload: Arg,
  timeoutMs: number,
  runId?: string,
): Promise<Ret> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(silent(id, update.name, timeoutMs)), timeoutMs);
  });
  try {
    return await Promise.race([client.workflow.getHandle(id, runId).executeUpdate(update, { args: [payload] }), late]);
  } catch (error) {
    if (error instanceof WorkflowUpdateFailedError) {
      const cause = (error.cause as { message?: string } | undefined)?.message ?? error.message;
      throw new Error(cause.startsWith(`${update.name} refused`) ? cause : `${update.name} refused: ${cause}`);
    }
    if (error instanceof WorkflowNotFoundError) throw notFound(id);
    if (error instanceof WorkflowUpdateRPCTimeoutOrCancelledError) throw silent(id, update.name, timeoutMs);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

function silent(id: string, name: string, timeoutMs: number): Error {
  return new Error(
    withFix(
      `${id} has not answered the ${name} update within ${Math.round(timeoutMs / 1000)} s; it may still be applied`,
      'check that a controller worker runs (`datum worker`), then `datum work show` the item, or pass a longer --timeout',
    ),
  );
}
