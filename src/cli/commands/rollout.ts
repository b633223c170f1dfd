import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type Client,
  type WorkflowExecutionInfo,
} from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { DesiredStateAuthority } from '../../activities/authority';
import {
  CONTROL_TASK_QUEUE,
  MEMO_ROLLOUT_CANCELLED,
  ROLLOUT_OUTCOMES,
  WORKFLOW_TYPES,
  outcomeWords,
  pauseRolloutUpdate,
  resumeRolloutUpdate,
  rolloutProgressQuery,
  rolloutWorkflowId,
  withFix,
  type RolloutCancelled,
  type RolloutNodeProgress,
  type RolloutResult,
  type RolloutWaves,
  type RolloutWorkflow,
  type WavesProgress,
} from '../../contract';
import type { ConvergenceStatus } from '../../domain';
import { UsageError, durationFlag, listFlag, outputFormat, wholeFlag, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { checkNode } from '../nodes';
import { ago, print, printDocument, printLine, table } from '../output';
import type { CommandModule } from '../command';
import { fleetDirFrom } from '../dirs';
import { fleetOverride } from '../fleet-view';
import { fleetForLabels, fleetForSelector, labelsFrom, selectorFlag } from '../selectors';
import { specsReadLabels, waveSettings, wavesFor, wantsWaves, type WaveFlags } from '../wave-plan';
import { selects, type Labels, type Selector } from '../../domain/selector';

const SETTLED_BAD = new Set<ConvergenceStatus>(['BLOCKED', 'CONFLICT']);
const ROLLOUT_ID = /^datum-rollout\/gen-(\d+)\/(.+)$/;

interface WaitFlags {
  wait?: boolean;
  timeout?: string;
}

/** --timeout only means something with --wait; a bad duration is a usage error either way. */
function timeoutOf(values: WaitFlags): number | null {
  if (values.timeout === undefined) return null;
  const ms = durationFlag(values.timeout, '--timeout');
  if (!values.wait) throw new UsageError(withFix('--timeout limits --wait', 'add --wait, or drop --timeout'));
  return ms;
}

// ---------------------------------------------------------------------------------------------
// rollout start

interface StartRaw extends ConnectionFlags, OutputFlags, WaitFlags, WaveFlags {
  generation?: string;
  nodes?: string;
  all?: boolean;
  selector?: string;
  fleet?: string;
}

export interface StartInput {
  values: StartRaw;
  generation: number;
  nodes: string[];
  /** Absent: every node at once. */
  waves: RolloutWaves | null;
  format: OutputFormat;
  timeoutMs: number | null;
}

async function fleetNodes(fleetDir: string): Promise<string[]> {
  const nodes = await new DesiredStateAuthority(fleetDir).nodes();
  if (nodes.length === 0)
    throw new UsageError(withFix(`${fleetDir}/desired/nodes has no <node>.yaml`, 'add desired state first'));
  return nodes;
}

export const rolloutStartCommand: CommandModule<StartRaw, StartInput> = {
  async input(values) {
    const generation = wholeFlag(values.generation, '--generation', '12 (the generation the desired-state files declare)');
    if ([values.nodes, values.all, values.selector].filter((v) => v !== undefined && v !== false).length !== 1)
      throw new UsageError(
        withFix(
          'which nodes?',
          'name them with --nodes N-1,N-2, take every node with --all, or select them with --selector role=web (one of them)',
        ),
      );
    const format = outputFormat(values);
    const timeoutMs = timeoutOf(values);
    const selector = selectorFlag(values.selector);
    const nodes = selector
      ? await selectedNodes(selector, values)
      : values.all
        ? await fleetNodes(fleetDirFrom(values.fleet))
        : listFlag(values.nodes).map((n) => checkNode(n));
    if (new Set(nodes).size !== nodes.length)
      throw new UsageError(withFix('a node is listed twice in --nodes', 'name each node once'));
    const waves = await wavesOf(values, nodes);
    return { values, generation, nodes, waves, format, timeoutMs };
  },
  async run({ values, generation, nodes, waves, format, timeoutMs }) {
    return await withTemporal(values, async (client) => {
      const { workflowId, attached } = await startOrAttach(client, generation, nodes, waves);
      if (values.wait) return await follow(client, workflowId, format, timeoutMs);
      if (format !== 'text') printDocument(format, { workflow_id: workflowId, generation, nodes, attached, waves });
      else
        print(
          `${attached ? 'Attached to' : 'Started'} rollout ${workflowId} of generation ${generation} to ${nodes.length} node(s)${waves ? ` in ${waves.waves.length} waves: ${waves.waves.map((w) => `${w.name} (${w.nodes.join(', ')})`).join('; ')}` : ''}. Follow it: datum rollout status ${workflowId} --wait`,
        );
      return 0;
    });
  },
};

/** --selector: the authority's nodes it selects (by name, or by their labels). */
async function selectedNodes(selector: Selector, values: StartRaw): Promise<string[]> {
  const fleetDir = fleetForSelector(selector, fleetOverride(values.fleet)) ?? fleetDirFrom(values.fleet);
  const labels = await labelsFrom(fleetDir);
  const nodes = [...labels.keys()].filter((n) => selects(selector, n, labels.get(n) ?? {}));
  if (nodes.length === 0)
    throw new UsageError(
      withFix(`--selector ${selector.text} selects no node of ${fleetDir}`, 'check the labels in desired/nodes/*.yaml'),
    );
  return nodes;
}

/** --waves or --wave-plan: the nodes in waves; null for every node at once. */
async function wavesOf(values: StartRaw, nodes: string[]): Promise<RolloutWaves | null> {
  if (!wantsWaves(values)) return null;
  const settings = (await waveSettings(values))!;
  const labels = specsReadLabels(settings.specs)
    ? await labelsFrom(fleetForLabels('a wave selector', fleetOverride(values.fleet)), nodes)
    : new Map<string, Labels>();
  return wavesFor(nodes, settings, labels);
}

/** One rollout per (generation, node set): starting it again while it runs attaches to it. */
async function startOrAttach(
  client: Client,
  generation: number,
  nodes: string[],
  waves: RolloutWaves | null,
): Promise<{ workflowId: string; attached: boolean }> {
  const workflowId = rolloutWorkflowId(generation, nodes);
  try {
    await client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId,
      args: [{ generation, nodes, ...(waves ? { waves } : {}) }],
    });
    return { workflowId, attached: false };
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return { workflowId, attached: true };
  }
}

// ---------------------------------------------------------------------------------------------
// Following a rollout: per-node lines as they change, until it ends or --timeout.

function progressLine(n: RolloutNodeProgress): string {
  const words = outcomeWords(n);
  return `${n.node.padEnd(12)} ${words.status.padEnd(10)} ${words.detail}`;
}

/** A rollout in waves, one line a wave: its state, and where it halted. */
function waveLines(w: WavesProgress): string[] {
  return w.waves.map((wave, i) => {
    const halt = w.halts.find((h) => h.wave === i && wave.name !== 'rollback');
    const how = halt
      ? ` — ${halt.item}${halt.resolution ? `: ${halt.resolution} by ${halt.resolved?.by}` : ' (waiting for a resolution)'}`
      : '';
    return `${wave.name.padEnd(12)} ${wave.state.padEnd(10)} generation ${wave.generation}: ${wave.nodes.map((n) => `${n.node} ${n.state}`).join(', ')}${how}`;
  });
}

type Ending = { result: RolloutResult } | { cancelled: true } | { failed: string } | { timedOut: true };

function ending(client: Client, workflowId: string, timeoutMs: number | null): Promise<Ending> {
  const handle = client.workflow.getHandle<RolloutWorkflow>(workflowId);
  const result = handle.result().then(
    (r): Ending => ({ result: r }),
    (error: unknown): Ending =>
      error instanceof WorkflowFailedError && error.cause instanceof CancelledFailure
        ? { cancelled: true }
        : { failed: (error as Error).message },
  );
  if (timeoutMs === null) return result;
  return Promise.race([result, new Promise<Ending>((r) => setTimeout(() => r({ timedOut: true }), timeoutMs).unref())]);
}

/** Per-node progress until the rollout ends; exit 1 when a node was refused or settled badly, or on --timeout. */
async function follow(client: Client, workflowId: string, format: OutputFormat, timeoutMs: number | null): Promise<number> {
  const handle = client.workflow.getHandle<RolloutWorkflow>(workflowId);
  const shown = new Map<string, string>();
  const show = (n: RolloutNodeProgress) => {
    const line = progressLine(n);
    if (shown.get(n.node) === line) return;
    shown.set(n.node, line);
    if (format === 'text') print(line);
    else if (format === 'jsonl') printLine({ rollout: workflowId, ...n });
  };
  const wavesShown = new Map<string, string>();
  const showWaves = (w: WavesProgress | undefined) => {
    for (const [i, line] of (w ? waveLines(w) : []).entries()) {
      const wave = w!.waves[i];
      const key = `${i}:${wave.state}:${w!.halts.filter((h) => h.wave === i).length}:${w!.halts.find((h) => h.wave === i)?.resolution ?? ''}`;
      if (wavesShown.get(wave.name) === key) continue;
      wavesShown.set(wave.name, key);
      if (format === 'text') print(`wave ${line}`);
      else if (format === 'jsonl')
        printLine({ rollout: workflowId, wave: wave.name, state: wave.state, generation: wave.generation });
    }
  };
  const ended = ending(client, workflowId, timeoutMs);
  let end: Ending | undefined;
  void ended.then((e) => (end = e));
  while (!end) {
    try {
      const progress = await handle.query(rolloutProgressQuery);
      showWaves(progress.waves);
      for (const n of progress.nodes) show(n);
    } catch {
      // The query needs a controller worker; the result below still arrives when one runs.
    }
    await Promise.race([ended, new Promise((r) => setTimeout(r, 1000))]);
  }
  return reportEnd(workflowId, end, format, show, shown);
}

function reportEnd(
  workflowId: string,
  end: Ending,
  format: OutputFormat,
  show: (n: RolloutNodeProgress) => void,
  shown: Map<string, string>,
): number {
  if ('timedOut' in end || 'cancelled' in end || 'failed' in end) {
    const why =
      'timedOut' in end
        ? withFix(
            `${workflowId} has not finished within --timeout; ${[...shown.values()].filter((l) => l.includes('reconciling')).length} node(s) still reconciling`,
            `the rollout goes on: follow it with \`datum rollout status ${workflowId} --wait\``,
          )
        : 'cancelled' in end
          ? withFix(`${workflowId} was cancelled`, `\`datum rollout status ${workflowId}\` shows which nodes it started`)
          : withFix(
              `${workflowId} failed: ${end.failed}`,
              `see it in the Web UI or with \`temporal workflow show -w ${workflowId}\``,
            );
    if (format === 'jsonl') printLine({ rollout: workflowId, done: false, error: why });
    process.stderr.write(`${why}\n`);
    return 1;
  }
  const { result } = end;
  for (const n of result.nodes) show(n);
  const bad = result.nodes.filter((n) => n.outcome !== ROLLOUT_OUTCOMES.reported || SETTLED_BAD.has(n.status));
  const waves = result.waves ? ` Waves: ${result.waves.state}${endedWords(result.waves)}.` : '';
  if (format === 'json') printDocument('json', { workflow_id: workflowId, ...result });
  else if (format === 'jsonl')
    printLine({
      rollout: workflowId,
      done: true,
      generation: result.generation,
      need_attention: bad.map((n) => n.node),
      ...(result.waves ? { waves: result.waves.state } : {}),
    });
  else {
    const attention = bad.length ? `; ${bad.map((n) => n.node).join(', ')} need attention (datum describe NODE)` : '';
    print(
      `\nGeneration ${result.generation}: ${result.nodes.length - bad.length} of ${result.nodes.length} node(s) settled well${attention}.${waves}`,
    );
  }
  return bad.length > 0 || (result.waves !== undefined && result.waves.state !== 'completed') ? 1 : 0;
}

/** How a rollout in waves ended, in words: who aborted it, what a rollback wrote. */
function endedWords(w: WavesProgress): string {
  const last = w.halts[w.halts.length - 1];
  if (w.state === 'aborted' && last?.resolved) return ` at ${w.waves[last.wave]?.name} by ${last.resolved.by}`;
  if (w.state === 'rolled_back' && w.rollback)
    return ` by ${w.rollback.by}: ${w.rollback.nodes.map((n) => (n.outcome === 'written' ? `${n.node} → generation ${n.generation} (the content of ${n.content_of})` : `${n.node} not rolled back: ${n.error}`)).join('; ')}`;
  return '';
}

// ---------------------------------------------------------------------------------------------
// Rollouts as objects: list, status, cancel.

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
