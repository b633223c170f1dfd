import { WorkflowNotFoundError, type Client, type WorkflowExecutionInfo } from '@temporalio/client';
import {
  MEMO_ROLLOUT_CANCELLED,
  WORKFLOW_TYPES,
  pauseRolloutUpdate,
  resumeRolloutUpdate,
  rolloutProgressQuery,
  withFix,
  type RolloutCancelled,
  type RolloutNodeProgress,
  type RolloutWorkflow,
  type WavesProgress,
} from '../../contract';
import { UsageError, outputFormat, wholeFlag, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { ago, print, printDocument, printLine, table } from '../output';
import type { CommandModule } from '../command';
import { ROLLOUT_ID, endedWords, follow, progressLine, timeoutOf, waveLines, type WaitFlags } from './rollout';

/*
 * Rollouts as objects, after `datum rollout start`: list, status, cancel, and pause | resume (a
 * rollout in waves starts no node and no wave while paused).
 */

export interface RolloutRow {
  workflow_id: string;
  generation: number | null;
  /** How many nodes, from the id: one named node, or `<n>-nodes-<hash>`. */
  nodes: number | null;
  node: string | null;
  status: string;
  started_at: string;
  closed_at: string | null;
}

function rolloutRow(w: Pick<WorkflowExecutionInfo, 'workflowId' | 'status' | 'startTime' | 'closeTime'>): RolloutRow {
  const m = ROLLOUT_ID.exec(w.workflowId);
  const many = m ? /^(\d+)-nodes-[0-9a-f]{12}$/.exec(m[2]) : null;
  return {
    workflow_id: w.workflowId,
    generation: m ? Number(m[1]) : null,
    nodes: many ? Number(many[1]) : m ? 1 : null,
    node: m && !many ? m[2] : null,
    status: w.status.name,
    started_at: w.startTime.toISOString(),
    closed_at: w.closeTime?.toISOString() ?? null,
  };
}

/** Rollouts newest first, from visibility alone. */
async function listRollouts(client: Client, filter: { generation?: number; running?: boolean }): Promise<RolloutRow[]> {
  const query = `WorkflowType = "${WORKFLOW_TYPES.rollout}"${filter.running ? ' AND ExecutionStatus = "Running"' : ''}`;
  const rows: RolloutRow[] = [];
  for await (const w of client.workflow.list({ query, pageSize: 1000 })) {
    const row = rolloutRow(w);
    if (filter.generation === undefined || row.generation === filter.generation) rows.push(row);
  }
  return rows.sort((a, b) => b.started_at.localeCompare(a.started_at));
}

interface ListRaw extends ConnectionFlags, OutputFlags {
  generation?: string;
  running?: boolean;
  limit?: string;
}

export interface ListInput {
  values: ListRaw;
  format: OutputFormat;
  generation?: number;
  limit: number;
}

export const rolloutListCommand: CommandModule<ListRaw, ListInput> = {
  input(values) {
    return {
      values,
      format: outputFormat(values),
      ...(values.generation !== undefined ? { generation: wholeFlag(values.generation, '--generation', '12') } : {}),
      limit: values.limit === undefined ? 50 : wholeFlag(values.limit, '--limit', '20'),
    };
  },
  async run({ values, format, generation, limit }) {
    return await withTemporal(values, async (client) => {
      const rows = (await listRollouts(client, { generation, running: values.running })).slice(0, limit);
      if (format === 'json') printDocument('json', { rollouts: rows });
      else if (format === 'jsonl') for (const r of rows) printLine(r);
      else if (rows.length === 0) print('No rollouts. Start one with `datum rollout start --generation G --all`.');
      else
        print(
          table(
            ['ROLLOUT', 'GEN', 'NODES', 'STATUS', 'STARTED', 'CLOSED'],
            rows.map((r) => [
              r.workflow_id,
              String(r.generation ?? '-'),
              r.node ?? String(r.nodes ?? '-'),
              r.status,
              ago(r.started_at),
              ago(r.closed_at),
            ]),
          ),
        );
      return 0;
    });
  },
};

interface StatusRaw extends ConnectionFlags, OutputFlags, WaitFlags {
  id?: string;
  generation?: string;
}

export interface StatusInput {
  values: StatusRaw;
  id: string | null;
  generation?: number;
  format: OutputFormat;
  timeoutMs: number | null;
}

function checkRolloutId(id: string): string {
  if (!ROLLOUT_ID.test(id))
    throw new UsageError(
      withFix(`"${id}" is not a rollout id`, 'rollout ids look like datum-rollout/gen-12/N-24 (`datum rollout list` shows them)'),
    );
  return id;
}

/** The rollout named, or the newest one (of --generation G). */
async function pickRollout(client: Client, id: string | null, generation?: number): Promise<string> {
  if (id) return id;
  const [newest] = await listRollouts(client, { generation });
  if (!newest)
    throw new Error(
      withFix(`no rollout${generation ? ` of generation ${generation}` : ''} found`, 'start one with `datum rollout start`'),
    );
  return newest.workflow_id;
}

export const rolloutStatusCommand: CommandModule<StatusRaw, StatusInput> = {
  input(values) {
    return {
      values,
      id: values.id === undefined ? null : checkRolloutId(values.id),
      ...(values.generation !== undefined ? { generation: wholeFlag(values.generation, '--generation', '12') } : {}),
      format: outputFormat(values),
      timeoutMs: timeoutOf(values),
    };
  },
  async run({ values, id, generation, format, timeoutMs }) {
    return await withTemporal(values, async (client) => {
      const workflowId = await pickRollout(client, id, generation);
      const view = await rolloutView(client, workflowId);
      if (values.wait && view.status === 'RUNNING') return await follow(client, workflowId, format, timeoutMs);
      if (format !== 'text') printDocument(format, view);
      else printView(view);
      return view.status === 'COMPLETED' || view.status === 'RUNNING' ? 0 : 1;
    });
  },
};

interface RolloutView {
  workflow_id: string;
  status: string;
  started_at: string;
  closed_at: string | null;
  generation: number | null;
  nodes: RolloutNodeProgress[] | null;
  cancelled: RolloutCancelled | null;
  /** A rollout in waves: its waves, pauses, halts and rollback. */
  waves: WavesProgress | null;
  /** Why per-node progress is missing (a running rollout's progress query needs a worker). */
  note: string | null;
}

async function rolloutView(client: Client, workflowId: string): Promise<RolloutView> {
  const handle = client.workflow.getHandle<RolloutWorkflow>(workflowId);
  let description;
  try {
    description = await handle.describe();
  } catch (error) {
    if (error instanceof WorkflowNotFoundError)
      throw new Error(withFix(`no rollout ${workflowId}`, '`datum rollout list` shows the rollouts there are'));
    throw error;
  }
  const row = rolloutRow(description);
  const cancelled = (description.memo?.[MEMO_ROLLOUT_CANCELLED] as RolloutCancelled | undefined) ?? null;
  const view: RolloutView = { ...row, generation: row.generation, nodes: null, cancelled, waves: null, note: null };
  if (row.status === 'COMPLETED') {
    const result = await handle.result();
    return { ...view, nodes: result.nodes, waves: result.waves ?? null };
  }
  try {
    const progress = await handle.query(rolloutProgressQuery);
    return { ...view, nodes: progress.nodes, waves: progress.waves ?? null };
  } catch (error) {
    return { ...view, note: `per-node progress needs a controller worker (${(error as Error).message})` };
  }
}

function printView(v: RolloutView): void {
  print(
    `${v.workflow_id}  generation ${v.generation ?? '?'}  ${v.status}  started ${ago(v.started_at)}${v.closed_at ? `, closed ${ago(v.closed_at)}` : ''}`,
  );
  if (v.cancelled) {
    print(
      `\nCancelled at ${v.cancelled.at}: it started ${v.cancelled.started.length} node(s), whose loops go on; it never started ${v.cancelled.not_started.length}.`,
    );
    if (v.cancelled.not_started.length) print(`  not started: ${v.cancelled.not_started.join(', ')}`);
    if (v.cancelled.refused.length) print(`  refused:     ${v.cancelled.refused.join(', ')}`);
  }
  if (v.waves) {
    const w = v.waves;
    print(
      `\nWaves: ${w.state}${endedWords(w)}. The gate: each node CONVERGED by a fresh observation within ${w.gate_deadline}; at most ${w.max_unavailable ?? 'a whole wave'} on the way at once.`,
    );
    if (w.paused)
      print(
        `Paused by ${w.paused.by} at ${w.paused.at}${w.paused.note ? ` (${w.paused.note})` : ''}: \`datum rollout resume ${v.workflow_id} --by NAME\``,
      );
    for (const line of waveLines(w)) print(`  ${line}`);
  }
  if (v.nodes) {
    print('');
    for (const n of v.nodes) print(progressLine(n));
  }
  if (v.note) print(`\n${v.note}`);
}

interface CancelRaw extends ConnectionFlags, OutputFlags {
  id: string;
}

export interface CancelInput {
  values: CancelRaw;
  id: string;
  format: OutputFormat;
}

export const rolloutCancelCommand: CommandModule<CancelRaw, CancelInput> = {
  input(values) {
    return { values, id: checkRolloutId(values.id), format: outputFormat(values) };
  },
  async run({ values, id, format }) {
    return await withTemporal(values, async (client) => {
      const before = await rolloutView(client, id);
      if (before.status !== 'RUNNING')
        throw new Error(withFix(`${id} is not running (${before.status})`, 'only a running rollout can be cancelled'));
      await client.workflow.getHandle(id).cancel();
      // The rollout records what it started once a worker handles the cancel; wait a little for it.
      let after = before;
      for (let i = 0; i < 40 && after.status === 'RUNNING'; i++) {
        await new Promise((r) => setTimeout(r, 250));
        after = await rolloutView(client, id);
      }
      if (format !== 'text') printDocument(format, after);
      else if (after.status === 'RUNNING')
        print(`Cancel requested for ${id}; it takes effect when a controller worker handles it (the loops it started go on).`);
      else printView(after);
      return 0;
    });
  },
};

// ---------------------------------------------------------------------------------------------
// pause | resume: a rollout in waves starts no node and no wave while paused.

interface PauseRaw extends ConnectionFlags, OutputFlags {
  id: string;
  by?: string;
  note?: string;
}

export interface PauseInput {
  values: PauseRaw;
  id: string;
  by: string;
  format: OutputFormat;
}

function pauseInput(values: PauseRaw): PauseInput {
  const by = values.by?.trim();
  if (!by) throw new UsageError(withFix('who asks?', 'say who you are with --by NAME (recorded by the rollout)'));
  return { values, id: checkRolloutId(values.id), by, format: outputFormat(values) };
}

async function pauseOrResume(input: PauseInput, which: 'pause' | 'resume'): Promise<number> {
  const { values, id, by, format } = input;
  return await withTemporal(values, async (client) => {
    const update = which === 'pause' ? pauseRolloutUpdate : resumeRolloutUpdate;
    let progress;
    try {
      progress = await client.workflow
        .getHandle(id)
        .executeUpdate(update, { args: [{ by, ...(values.note !== undefined ? { note: values.note } : {}) }] });
    } catch (error) {
      if (error instanceof WorkflowNotFoundError)
        throw new Error(withFix(`no running rollout ${id}`, '`datum rollout list --running` shows the ones there are'));
      const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
      throw new Error(
        /not found|unknown update|no handler/i.test(cause)
          ? withFix(`${id} has no waves, so it cannot ${which}`, 'start a rollout with --waves to pause it between waves')
          : `${which} refused: ${cause}`,
      );
    }
    if (format !== 'text') printDocument(format, progress);
    else if (which === 'pause')
      print(
        `Paused ${id} by ${by}: it starts no node and no wave until \`datum rollout resume ${id} --by NAME\`; the loops it started go on.`,
      );
    else
      print(`Resumed ${id} by ${by}: it goes on from ${progress.waves?.waves[progress.waves.current]?.name ?? 'where it was'}.`);
    return 0;
  });
}

export const rolloutPauseCommand: CommandModule<PauseRaw, PauseInput> = {
  input: pauseInput,
  run: (input) => pauseOrResume(input, 'pause'),
};

export const rolloutResumeCommand: CommandModule<PauseRaw, PauseInput> = {
  input: pauseInput,
  run: (input) => pauseOrResume(input, 'resume'),
};
