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
import { wavesProblems } from '../domain';
import { rolloutInWaves } from './rollout-waves';
import { inForce } from './patches';
import { summaryLine } from './summaries';
import {
  MEMO_ROLLOUT_CANCELLED,
  ROLLOUT_OUTCOMES,
  ROLLOUT_SETTLED,
  WORKFLOW_PATCH,
  isNodeId,
  rolloutProgressQuery,
  withFix,
  type ControlActivities,
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
const POLL_MS = 1000;

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
  const prepared = carried ?? (await (cancellable ? prepareUnlessCancelled(input) : prepare(input)));
  if (!cancellable) return await follow(input, prepared);
  if (CancellationScope.current().consideredCancelled) return endCancelled(input, prepared, null);
  try {
    return await follow(input, prepared);
  } catch (error) {
    if (isCancellation(error)) return endCancelled(input, prepared, error);
    throw error;
  }
}

/** Waits for every started node to settle, reporting progress; then each node's outcome. */
async function follow(input: RolloutInput, prepared: PreparedNode[]): Promise<RolloutResult> {
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
  for (;;) {
    const waiting = started.filter((p) => !outcomes.has(p.node));
    if (waiting.length === 0) break;
    const reports = (
      await Promise.all(
        chunk(
          waiting.map((p) => p.workflow_id),
          BATCH,
        ).map((ids) => acts.nodeStates.executeWithOptions({ summary: `read the state of ${ids.length} node(s)` }, [ids])),
      )
    ).flat();
    for (const report of reports) {
      const p = waiting.find((w) => w.workflow_id === report.workflow_id)!;
      const s = report.state;
      if (
        s &&
        s.desired_generation === input.generation &&
        s.convergence_status &&
        ROLLOUT_SETTLED.includes(s.convergence_status)
      ) {
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
    }
    if (outcomes.size === input.nodes.length) break;
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof rollout>({ ...input, prepared });
    }
    await sleep(POLL_MS, { summary: `${outcomes.size} of ${input.nodes.length} node(s) settled` });
  }
  // Every node has an outcome now: refused at preparation, or reported once settled.
  return { generation: input.generation, nodes: input.nodes.map((n) => outcomes.get(n) ?? unprepared(n)) };
}

/** Batches of PREPARE_BATCH nodes, PREPARE_LANES at a time, none started once the rollout is cancelled. */
async function prepareUnlessCancelled(input: RolloutInput): Promise<PreparedNode[]> {
  const batches = chunk(input.nodes, PREPARE_BATCH);
  const done: PreparedNode[][] = [];
  let next = 0;
  const lane = async () => {
    while (next < batches.length && !CancellationScope.current().consideredCancelled) {
      const i = next++;
      done[i] = await preparing.prepareRolloutNodes.executeWithOptions({ summary: startSummary(input.generation, batches[i]) }, [
        { generation: input.generation, nodes: batches[i] },
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

async function prepare(input: RolloutInput): Promise<PreparedNode[]> {
  return (
    await Promise.all(
      chunk(input.nodes, BATCH).map((nodes) =>
        acts.prepareRolloutNodes.executeWithOptions({ summary: startSummary(input.generation, nodes) }, [
          { generation: input.generation, nodes },
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
