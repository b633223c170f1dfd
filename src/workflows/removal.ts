import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  log,
  proxyActivities,
  workflowInfo,
} from '@temporalio/workflow';
import {
  NO_PLAN,
  agentResources,
  durationMs,
  planningRemoval,
  plannedRemoval,
  removalClosed,
  removalResolved,
  type CheckedResolve,
} from '../domain';
import {
  REFUSALS,
  agentTaskQueue,
  removalItemId,
  type AgentActivities,
  type ControlActivities,
  type RemovalItemInput,
  type RemovalPlan,
  type RemovalPlanRequest,
  type RemovalWorkflow,
  type WorkItem,
} from '../contract';
import { holdItem, holdUntilClosed, installItemHandlers, publish, type HeldItem } from './decision-item';
import { summaryLine } from './summaries';

/**
 * A planned destructive change, handed over as work (docs/operations.md, "Removing things"): what
 * a node's newest generation no longer declares, or everything Datum holds on a decommissioned
 * node. The node's agent makes the plan (exactly what would go, each target as it is now); only
 * an approval carries it out, once, on a host whose agent.yaml allows removing those types; a
 * decline closes it. The reconcile loop never removes anything: this item does, by consent.
 */
export const removal: RemovalWorkflow = async (input) => {
  const id = workflowInfo().workflowId;
  if (id !== removalItemId(input.node, input.cause))
    throw ApplicationFailure.nonRetryable(`${id} is not the planned removal of ${input.node}`, 'InvalidWorkflowInput');
  const now = () => new Date(Date.now()).toISOString();
  const h = holdItem(planningRemoval(id, input.node, input.cause, now()), durationMs(input.escalate_after), planLines);
  installItemHandlers(h, (r, identity) => carryOut(h, input, r, identity));
  const plan = await makePlan(h, input);
  if (plan === null) return await ended(h);
  h.item =
    plan.targets.length === 0
      ? removalClosed(h.item, `Nothing to remove on ${input.node}${keptWords(plan)}.`, now(), plan)
      : plannedRemoval(h.item, plan, now());
  publish(h);
  await holdUntilClosed(h);
  return await ended(h);
};

async function ended(h: HeldItem): Promise<WorkItem> {
  await condition(allHandlersFinished);
  return h.item;
}

const keptWords = (plan: RemovalPlan) =>
  plan.kept.length ? `; left in place: ${plan.kept.map((k) => `${k.target} (${k.why})`).join('; ')}` : '';

// ---------------------------------------------------------------------------------------------
// The plan: the node's agent says what Datum holds there that no longer belongs to it.

const control = proxyActivities<ControlActivities>({
  startToCloseTimeout: '1m',
  retry: { initialInterval: '1s', maximumAttempts: 5, nonRetryableErrorTypes: ['StillDeclared', 'MisconfiguredWorker'] },
});

/** Planning waits until the agent has observed the generation (it says so until then), up to a day. */
const planner = (node: string) =>
  proxyActivities<AgentActivities>({
    taskQueue: agentTaskQueue(node),
    startToCloseTimeout: '1m',
    scheduleToCloseTimeout: '24h',
    heartbeatTimeout: '30s',
    retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1m', nonRetryableErrorTypes: [...REFUSALS] },
  });

/** The plan, or null when it cannot be made (the item is closed, saying why). */
async function makePlan(h: HeldItem, input: RemovalItemInput): Promise<RemovalPlan | null> {
  const now = () => new Date(Date.now()).toISOString();
  try {
    const request = await planRequest(h, input);
    if ('superseded' in request) {
      h.item = removalClosed(h.item, request.superseded, now());
      return null;
    }
    const answer = await planner(input.node).planRemoval.executeWithOptions(
      { summary: summaryLine(`plan the removal on ${input.node}`) },
      [request],
    );
    return {
      cause: input.cause,
      planned_at: now(),
      generation: answer.generation,
      targets: answer.targets,
      kept: answer.kept,
      done: null,
    };
  } catch (error) {
    const why = error instanceof ActivityFailure && error.cause ? error.cause.message : String(error);
    log.warn('a planned removal could not be planned', { id: h.item.id, why });
    h.item = removalClosed(h.item, `${NO_PLAN}: ${why}`, now());
    return null;
  } finally {
    publish(h);
  }
}

/** What the agent is asked: a decommission ends the node's loops first; a drop names the generation whose resources stay. */
async function planRequest(h: HeldItem, input: RemovalItemInput): Promise<RemovalPlanRequest | { superseded: string }> {
  const node = input.node;
  if (input.cause.kind === 'decommission') {
    const { ended } = await control.endNodeLoops.executeWithOptions({ summary: summaryLine(`end the loops of ${node}`) }, [
      { node, item: h.item.id, by: input.cause.by },
    ]);
    log.info('decommission ended the node loops', { node, ended });
    return { node, cause: 'decommission', generation: null, resources: {} };
  }
  const generation = input.cause.generation;
  const read = await control.readAuthority.executeWithOptions({ summary: summaryLine(`read authority ${node}`) }, [node]);
  if (!read.ok) throw ApplicationFailure.nonRetryable(read.error, 'InvalidDesiredState');
  if (read.intent.generation !== generation)
    return {
      superseded: `The authority for ${node} is at generation ${read.intent.generation} now, not ${generation}: the rollout of that generation plans its own removal, and this one removes nothing.`,
    };
  return { node, cause: 'dropped', generation, resources: agentResources(read.intent) };
}

// ---------------------------------------------------------------------------------------------
// A resolution: approve (the agent removes exactly the plan's targets, once) or decline.

const remover = (node: string) =>
  proxyActivities<AgentActivities>({
    taskQueue: agentTaskQueue(node),
    scheduleToStartTimeout: '1m',
    startToCloseTimeout: '5m',
    heartbeatTimeout: '30s',
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumAttempts: 3, nonRetryableErrorTypes: [...REFUSALS] },
  });

async function carryOut(h: HeldItem, input: RemovalItemInput, r: CheckedResolve, identity: string | null): Promise<void> {
  const now = () => new Date(Date.now()).toISOString();
  if (r.resolution !== 'approve') return void (h.item = removalResolved(h.item, r, identity, null, now()));
  const plan = h.item.removal!;
  try {
    const done = await remover(input.node).removeTargets.executeWithOptions(
      { summary: summaryLine(`remove ${plan.targets.length} target(s) on ${input.node}, approved by ${r.by}`) },
      [
        {
          node: input.node,
          item: h.item.id,
          cause: input.cause.kind,
          key: `${h.item.id}@${h.runId}`,
          approval: { by: r.by, identity, note: r.note, at: now(), ...(r.operator ? { operator: r.operator } : {}) },
          targets: plan.targets.map((t) => ({ target: t.target, marker: t.marker, sha256: t.sha256 })),
        },
      ],
    );
    h.item = removalResolved(h.item, r, identity, done, now());
  } catch (error) {
    const cause = error instanceof ActivityFailure && error.cause ? error.cause : null;
    const why = cause?.message ?? String(error);
    // What the plan saw has moved: nothing was removed, and the plan is made again for a new judgement.
    if ((cause as ApplicationFailure | null)?.type === 'MarkerMoved') {
      const again = await makePlan(h, input);
      if (again) h.item = plannedRemoval(h.item, again, now(), true);
    }
    throw ApplicationFailure.nonRetryable(`approve refused: ${why}`, 'ResolutionRefused');
  }
}

function planLines(item: WorkItem): string[] {
  const plan = item.removal;
  if (!plan) return [];
  return [
    '| would remove | size | sha256 | claimed by |',
    '|---|---|---|---|',
    ...plan.targets.map(
      (t) =>
        `| \`${t.target}\` | ${t.size} | ${t.sha256.slice(0, 12)}… | ${t.resource_key} (gen ${t.claimed_generation ?? '?'}) |`,
    ),
    ...(plan.kept.length ? ['', `Left in place: ${plan.kept.map((k) => `\`${k.target}\` (${k.why})`).join('; ')}`] : []),
  ];
}
