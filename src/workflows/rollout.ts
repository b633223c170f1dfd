import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import { nodeId } from '../domain';
import { echo } from '../domain/bounds';
import {
  ROLLOUT_OUTCOMES,
  ROLLOUT_SETTLED,
  rolloutProgressQuery,
  withFix,
  type ControlActivities,
  type PreparedNode,
  type RolloutInput,
  type RolloutNodeOutcome,
  type RolloutNodeProgress,
  type RolloutProgress,
  type RolloutResult,
} from '../contract';

const acts = proxyActivities<ControlActivities>({
  startToCloseTimeout: '5m',
  retry: { initialInterval: '1s', maximumAttempts: 5 },
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
  const prepared = input.prepared ?? (await prepare(input));
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
        ).map((ids) => acts.nodeStates(ids)),
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
    await sleep(POLL_MS);
  }
  // Every node has an outcome now: refused at preparation, or reported once settled.
  return { generation: input.generation, nodes: input.nodes.map((n) => outcomes.get(n) ?? unprepared(n)) };
}

async function prepare(input: RolloutInput): Promise<PreparedNode[]> {
  return (
    await Promise.all(chunk(input.nodes, BATCH).map((nodes) => acts.prepareRolloutNodes({ generation: input.generation, nodes })))
  ).flat();
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

function checkInput(input: RolloutInput): void {
  const problems: string[] = [];
  if (!Number.isInteger(input?.generation) || input.generation < 1)
    problems.push(`generation ${echo(input?.generation)} must be a whole number of 1 or more`);
  if (!Array.isArray(input?.nodes) || input.nodes.length === 0) problems.push('nodes must be a non-empty list of node names');
  else {
    const bad = input.nodes.filter((n) => !nodeId.safeParse(n).success);
    if (bad.length) problems.push(`not node names: ${bad.map((n) => echo(n)).join(', ')}`);
    if (new Set(input.nodes).size !== input.nodes.length) problems.push('a node is listed twice');
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
