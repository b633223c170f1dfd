import { ApplicationFailure, allHandlersFinished, condition, workflowInfo } from '@temporalio/workflow';
import { durationMs, gateResolved, openGateItem } from '../domain';
import { gateItemId, type RolloutGateWorkflow, type WorkItem } from '../contract';
import { holdItem, holdUntilClosed, installItemHandlers } from './decision-item';

/**
 * A rollout halted at a failed gate, handed over as work (docs/operations.md): a child of the
 * rollout, id datum-work/<rollout>/ROLLOUT_HALTED/wave-<n>, listing the wave's failing nodes with
 * their latest entries, the waves that wait, and what a rollback would write. A resolver claims
 * and resolves it like any work item; the item closes with the resolution, which its rollout
 * (waiting on it) carries out.
 */
export const rolloutGate: RolloutGateWorkflow = async (input) => {
  const id = workflowInfo().workflowId;
  if (id !== gateItemId(input.halt.rollout, input.halt.wave) || workflowInfo().parent?.workflowId !== input.halt.rollout)
    throw ApplicationFailure.nonRetryable(
      `${id} is not the halted wave ${input.halt.wave + 1} of ${input.halt.rollout}; only its rollout opens it`,
      'InvalidWorkflowInput',
    );
  const h = holdItem(openGateItem(id, input, new Date(Date.now()).toISOString()), durationMs(input.escalate_after), gateLines);
  installItemHandlers(h, (r, identity) => {
    h.item = gateResolved(h.item, r, identity, new Date(Date.now()).toISOString());
    return Promise.resolve();
  });
  await holdUntilClosed(h);
  await condition(allHandlersFinished);
  return h.item;
};

function gateLines(item: WorkItem): string[] {
  const g = item.gate;
  if (!g) return [];
  return [
    '| failing node | gate | why |',
    '|---|---|---|',
    ...g.failing.map((f) => `| ${f.node} | ${f.state} | ${(f.why ?? '').replace(/\|/g, '/')} |`),
    '',
    `Waiting: ${g.later_waves.map((w) => `${w.name} (${w.nodes.length})`).join(', ') || 'none'}.`,
  ];
}
