import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError, type Client } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { DesiredStateAuthority } from '../../activities/authority';
import {
  CONTROL_TASK_QUEUE,
  ROLLOUT_OUTCOMES,
  WORKFLOW_TYPES,
  outcomeWords,
  rolloutProgressQuery,
  rolloutWorkflowId,
  withFix,
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
import { print, printDocument, printLine } from '../output';
import type { CommandModule } from '../command';
import { fleetDirFrom } from '../dirs';
import { fleetOverride } from '../fleet-view';
import { fleetForLabels, fleetForSelector, labelsFrom, selectorFlag } from '../selectors';
import { specsReadLabels, waveSettings, wavesFor, wantsWaves, type WaveFlags } from '../wave-plan';
import { selects, type Labels, type Selector } from '../../domain/selector';

const SETTLED_BAD = new Set<ConvergenceStatus>(['BLOCKED', 'CONFLICT']);
export const ROLLOUT_ID = /^datum-rollout\/gen-(\d+)\/(.+)$/;

export interface WaitFlags {
  wait?: boolean;
  timeout?: string;
}

/** --timeout only means something with --wait; a bad duration is a usage error either way. */
export function timeoutOf(values: WaitFlags): number | null {
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

export function progressLine(n: RolloutNodeProgress): string {
  const words = outcomeWords(n);
  return `${n.node.padEnd(12)} ${words.status.padEnd(10)} ${words.detail}`;
}

/** A rollout in waves, one line a wave: its state, and where it halted. */
export function waveLines(w: WavesProgress): string[] {
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
export async function follow(
  client: Client,
  workflowId: string,
  format: OutputFormat,
  timeoutMs: number | null,
): Promise<number> {
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
export function endedWords(w: WavesProgress): string {
  const last = w.halts[w.halts.length - 1];
  if (w.state === 'aborted' && last?.resolved) return ` at ${w.waves[last.wave]?.name} by ${last.resolved.by}`;
  if (w.state === 'rolled_back' && w.rollback)
    return ` by ${w.rollback.by}: ${w.rollback.nodes.map((n) => (n.outcome === 'written' ? `${n.node} → generation ${n.generation} (the content of ${n.content_of})` : `${n.node} not rolled back: ${n.error}`)).join('; ')}`;
  return '';
}
