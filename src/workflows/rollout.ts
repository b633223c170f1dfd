import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  isCancellation,
  proxyActivities,
  setHandler,
  sleep,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import { echo } from '../domain/bounds';
import { settlesRollout, wavesProblems } from '../domain';
import { rolloutInWaves } from './rollout-waves';
import { inForce, ROLLOUT_WAITS } from './patches';
import { summaryLine } from './summaries';
import {
  MEMO_ROLLOUT_CANCELLED,
  ROLLOUT_OUTCOMES,
  WORKFLOW_PATCH,
  isNodeId,
  nodeSettledSignal,
  rolloutProgressQuery,
  withFix,
  type ControlActivities,
  type NodeStateReport,
  type PreparedNode,
  type RolloutCancelled,
  type RolloutInput,
  type RolloutNodeOutcome,
  type RolloutNodeProgress,
  type RolloutProgress,
  type RolloutResult,
  type RolloutWaves,
} from '../contract';

const acts = proxyActivities<ControlActivities>({
  startToCloseTimeout: '5m',
  retry: { initialInterval: '1s', maximumAttempts: 5 },
});

/**
 * A cancelled rollout starts no node it has not started yet (`datum rollout cancel`), so nodes are
 * prepared in small batches, a few at a time, and no batch starts once the rollout is cancelled;
 * batches in flight finish (WAIT_CANCELLATION_COMPLETED), so the rollout knows what it started.
 */
const PREPARE_BATCH = 25;
const PREPARE_LANES = 8;
const preparing = proxyActivities<ControlActivities>({
  startToCloseTimeout: '5m',
  retry: { initialInterval: '1s', maximumAttempts: 5 },
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
});

const BATCH = 100;
/** How often a rollout recorded before it heard its loops read every node's state. */
const POLL_MS = 1000;
/** How often a rollout that hears its loops reads the nodes that have not said they settled. */
const POLL_DEFAULT_SECONDS = 15;
/** The most often it reads the nodes that said they settled. */
const HEAR_EVERY_MS = 1000;

/**
 * Starts or attaches to one reconcileNode per node at `generation`, hands over from older
 * generations by refreshDesired, refuses nodes whose authority is elsewhere (the others go on),
 * and reports each node's status once every node has settled. No staging: every node at once.
 */
export async function rollout(input: RolloutInput): Promise<RolloutResult> {
  checkInput(input);
  // Waves are new input: a rollout recorded before them never has any, and replays below as it ran.
  if (input.waves !== undefined) return await rolloutInWaves(input as RolloutInput & { waves: RolloutWaves });
  const carried = trustedPrepared(input);
  const cancellable = inForce(WORKFLOW_PATCH.rolloutCancelStopsStarting);
  const hears = inForce(WORKFLOW_PATCH.rolloutHearsSettled) ? hearSettled(input) : null;
  const reportTo = hears ? { report_to: workflowInfo().workflowId } : {};
  const prepared = carried ?? (await (cancellable ? prepareUnlessCancelled(input, reportTo) : prepare(input, reportTo)));
  if (!cancellable) return await follow(input, prepared, hears);
  if (CancellationScope.current().consideredCancelled) return endCancelled(input, prepared, null);
  try {
    return await follow(input, prepared, hears);
  } catch (error) {
    if (isCancellation(error)) return endCancelled(input, prepared, error);
    throw error;
  }
}

/** Waits for every started node to settle, reporting progress; then each node's outcome. */
async function follow(input: RolloutInput, prepared: PreparedNode[], hears: Hearing | null): Promise<RolloutResult> {
  const outcomes = new Map<string, RolloutNodeOutcome>();
  for (const p of prepared) {
    if (p.outcome === 'refused') outcomes.set(p.node, { node: p.node, outcome: ROLLOUT_OUTCOMES.refused, error: p.error });
  }
  const progress = (): RolloutProgress => ({
    generation: input.generation,
    nodes: input.nodes.map((n) => outcomes.get(n) ?? pendingOutcome(n, prepared)),
  });
  setHandler(rolloutProgressQuery, progress);

  const started = prepared.filter((p): p is Extract<PreparedNode, { outcome: 'started' }> => p.outcome === 'started');
  // Told: the loops that said they settled, read at once; null: every node still waiting, which
  // a rollout that hears its loops reads only every pollMs (a loop attached to, not started,
  // or one that began before loops told, says nothing).
  let told: string[] | null = null;
  const last = { full: 0, read: 0 };
  for (;;) {
    last.read = Date.now();
    if (told === null) last.full = last.read;
    const waiting = started.filter((p) => !outcomes.has(p.node) && (told === null || told.includes(p.workflow_id)));
    const reports = await readStates(
      waiting.map((p) => p.workflow_id),
      told !== null,
    );
    for (const r of reports)
      settle(
        input,
        outcomes,
        waiting.find((w) => w.workflow_id === r.workflow_id)!,
        r,
      );
    if (outcomes.size === input.nodes.length) break;
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof rollout>({ ...input, prepared });
    }
    const summary = `${outcomes.size} of ${input.nodes.length} node(s) settled`;
    if (hears) told = await nextTold(hears, last, summary);
    else await sleep(POLL_MS, { summary });
  }
  // Every node has an outcome now: refused at preparation, or reported once settled.
  return { generation: input.generation, nodes: input.nodes.map((n) => outcomes.get(n) ?? unprepared(n)) };
}

async function readStates(ids: string[], told: boolean): Promise<NodeStateReport[]> {
  const summary = (n: number) => `read the state of ${n} node(s)${told ? ' that said they settled' : ''}`;
  return (
    await Promise.all(
      chunk(ids, BATCH).map((batch) =>
        acts.nodeStates.executeWithOptions({ summary: summary(batch.length) }, told ? [batch, 'told'] : [batch]),
      ),
    )
  ).flat();
}

/** A node's outcome, once its own loop's state says it settled at this generation. */
function settle(
  input: RolloutInput,
  outcomes: Map<string, RolloutNodeOutcome>,
  p: Extract<PreparedNode, { outcome: 'started' }>,
  report: NodeStateReport,
): void {
  const s = report.state;
  if (!s || s.desired_generation !== input.generation || !s.convergence_status) return;
  // The loop's own early re-look (a stale snapshot, an unanswered pass) is not an outcome (settlesRollout).
  const settling = {
    status: s.convergence_status,
    reason: s.reason,
    not_before: s.recheck_trigger?.not_before,
    stale_retakes: s.stale_retakes,
  };
  if (!settlesRollout(settling, ROLLOUT_WAITS)) return;
  outcomes.set(p.node, {
    node: p.node,
    outcome: ROLLOUT_OUTCOMES.reported,
    workflow_id: p.workflow_id,
    status: s.convergence_status,
    reason: s.reason!,
    reason_detail: s.reason_detail ?? '',
    handed_over_from: p.handed_over_from,
  });
}

/**
 * The loops that said they settled, once any has, at most one read a HEAR_EVERY_MS so a thousand
 * loops settling one by one make a few reads, not a thousand; null once the read of every
 * waiting node is due.
 */
async function nextTold(hears: Hearing, last: { full: number; read: number }, summary: string): Promise<string[] | null> {
  const untilFull = last.full + hears.pollMs - Date.now();
  if (untilFull <= 0 || !(await condition(() => hears.told.size > 0, untilFull, { summary }))) return null;
  const sinceRead = Date.now() - last.read;
  if (sinceRead < HEAR_EVERY_MS) await sleep(HEAR_EVERY_MS - sinceRead, { summary });
  return hears.take();
}

/**
 * What a rollout hears from its loops (WORKFLOW_PATCH.rolloutHearsSettled): the ids that said
 * they settled since it last looked, and how often it reads the others anyway.
 */
interface Hearing {
  readonly told: Set<string>;
  readonly pollMs: number;
  take(): string[];
}

function hearSettled(input: RolloutInput): Hearing {
  const told = new Set<string>();
  setHandler(nodeSettledSignal, (payload) => {
    if (typeof payload?.workflow_id === 'string') told.add(payload.workflow_id);
  });
  return {
    told,
    pollMs: (input.poll_seconds ?? POLL_DEFAULT_SECONDS) * 1000,
    take: () => {
      const ids = [...told];
      told.clear();
      return ids;
    },
  };
}

/** Batches of PREPARE_BATCH nodes, PREPARE_LANES at a time, none started once the rollout is cancelled. */
async function prepareUnlessCancelled(input: RolloutInput, reportTo: { report_to?: string }): Promise<PreparedNode[]> {
  const batches = chunk(input.nodes, PREPARE_BATCH);
  const done: PreparedNode[][] = [];
  let next = 0;
  const lane = async () => {
    while (next < batches.length && !CancellationScope.current().consideredCancelled) {
      const i = next++;
      done[i] = await preparing.prepareRolloutNodes.executeWithOptions({ summary: startSummary(input.generation, batches[i]) }, [
        { generation: input.generation, nodes: batches[i], ...reportTo },
      ]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PREPARE_LANES, batches.length) }, lane));
  return done.flat();
}

/**
 * The rollout was cancelled: it records which nodes it started (their loops go on) and which it
 * never started, in its memo for `datum rollout status`, and ends as cancelled.
 */
function endCancelled(input: RolloutInput, prepared: PreparedNode[], error: unknown): never {
  const started = new Set(prepared.filter((p) => p.outcome === 'started').map((p) => p.node));
  const refused = new Set(prepared.filter((p) => p.outcome === 'refused').map((p) => p.node));
  const cancelled: RolloutCancelled = {
    at: new Date().toISOString(),
    started: input.nodes.filter((n) => started.has(n)),
    refused: input.nodes.filter((n) => refused.has(n)),
    not_started: input.nodes.filter((n) => !started.has(n) && !refused.has(n)),
  };
  upsertMemo({ [MEMO_ROLLOUT_CANCELLED]: cancelled });
  throw error instanceof CancelledFailure ? error : new CancelledFailure('rollout cancelled');
}

async function prepare(input: RolloutInput, reportTo: { report_to?: string }): Promise<PreparedNode[]> {
  return (
    await Promise.all(
      chunk(input.nodes, BATCH).map((nodes) =>
        acts.prepareRolloutNodes.executeWithOptions({ summary: startSummary(input.generation, nodes) }, [
          { generation: input.generation, nodes, ...reportTo },
        ]),
      ),
    )
  ).flat();
}

/** "start generation 7: N-21 … N-25 (5 nodes)", one short line whatever the node names. */
function startSummary(generation: number, nodes: string[]): string {
  const span = nodes.length === 1 ? nodes[0] : `${nodes[0]} … ${nodes[nodes.length - 1]}`;
  return summaryLine(`start generation ${generation}: ${span} (${nodes.length} node${nodes.length === 1 ? '' : 's'})`);
}

function pendingOutcome(node: string, prepared: PreparedNode[]): RolloutNodeProgress {
  const p = prepared.find((x) => x.node === node);
  if (!p) return unprepared(node);
  if (p.outcome === 'refused') return { node, outcome: ROLLOUT_OUTCOMES.refused, error: p.error };
  return { node, outcome: ROLLOUT_OUTCOMES.pending, workflow_id: p.workflow_id, handed_over_from: p.handed_over_from };
}

/** Preparation answers for every node it is given; a node without an answer was never started. */
function unprepared(node: string): RolloutNodeOutcome {
  return {
    node,
    outcome: ROLLOUT_OUTCOMES.refused,
    error: withFix(`${node} was not prepared for this rollout`, 'start the rollout again'),
  };
}

/**
 * `prepared` is handed over by continue-as-new of this same rollout, and by nothing else: the
 * server sets continuedFromExecutionRunId for that only. A caller who starts a rollout with its
 * own `prepared` would skip preparation and have any loop's state (another node's, another
 * generation's) reported as this node's outcome. Patched: a run recorded before this rule took
 * what it was given, and replays as it did.
 */
function trustedPrepared(input: RolloutInput): PreparedNode[] | undefined {
  if (input.prepared === undefined || workflowInfo().continuedFromExecutionRunId) return input.prepared;
  if (!inForce(WORKFLOW_PATCH.rolloutCarryFromContinueAsNew)) return input.prepared;
  throw ApplicationFailure.nonRetryable(
    withFix(
      'rollout input rejected: "prepared" is handed over by continue-as-new of this rollout only, and this run was started directly',
      `start it with {"generation": ${input.generation}, "nodes": [...]} and nothing else (datum rollout start --generation ${input.generation}); Datum prepares each node itself`,
    ),
    'InvalidWorkflowInput',
  );
}

function checkInput(input: RolloutInput): void {
  const problems: string[] = [];
  if (!Number.isInteger(input?.generation) || input.generation < 1)
    problems.push(`generation ${echo(input?.generation)} must be a whole number of 1 or more`);
  if (!Array.isArray(input?.nodes) || input.nodes.length === 0) problems.push('nodes must be a non-empty list of node names');
  else {
    const bad = input.nodes.filter((n) => !isNodeId(n));
    if (bad.length) problems.push(`not node names: ${bad.map((n) => echo(n)).join(', ')}`);
    if (new Set(input.nodes).size !== input.nodes.length) problems.push('a node is listed twice');
    problems.push(...wavesProblems(input.nodes, input.waves));
  }
  const poll = input?.poll_seconds;
  if (poll !== undefined && (!Number.isInteger(poll) || poll < 1 || poll > 86_400))
    problems.push(`poll_seconds ${echo(poll)} must be a whole number of seconds from 1 to 86400`);
  if (problems.length > 0) {
    throw ApplicationFailure.nonRetryable(
      withFix(`rollout input rejected: ${problems.join('; ')}`, 'start it with {"generation": 12, "nodes": ["N-24"]}'),
      'InvalidWorkflowInput',
    );
  }
}

function chunk<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
