import { log } from '@temporalio/activity';
import { type Client } from '@temporalio/client';
import { ApplicationFailure, TypedSearchAttributes } from '@temporalio/common';
import {
  CONTROL_TASK_QUEUE,
  DatumConditions,
  DatumNode,
  DatumStatus,
  MEMO_SUMMARY,
  WORKFLOW_TYPES,
  removalItemId,
  withFix,
  type AuthorityRead,
  type RemovalCause,
  type RemovalWorkflow,
} from '../contract';
import type { DesiredStateAuthority } from './authority';
import type { LedgerStore } from './ledger-store';

/*
 * The controller's side of planned removals (docs/operations.md, "Removing things"): a node
 * handed over to a newer generation gets a removal item that asks its agent what that generation
 * no longer declares; a decommission ends the node's loops first. The bound intents a rollback
 * needs are kept here too, as loops bind them.
 */

/** Starts (or attaches to) the planned removal of a node; it plans with the node's agent, and closes when there is nothing to remove. */
export async function openRemovalItem(c: Client, node: string, cause: RemovalCause, escalateAfter: string): Promise<string> {
  const id = removalItemId(node, cause);
  const what =
    cause.kind === 'dropped'
      ? `what generation ${cause.generation} no longer declares`
      : `everything Datum holds (decommissioned by ${cause.by})`;
  await c.workflow.start<RemovalWorkflow>(WORKFLOW_TYPES.removal, {
    taskQueue: CONTROL_TASK_QUEUE,
    workflowId: id,
    args: [{ node, cause, escalate_after: escalateAfter }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    staticSummary: `work: planned removal on ${node}: ${what}`,
    staticDetails: `A planned destructive change on ${node}: ${what}. Nothing is removed unless someone approves it. \`datum work show ${id}\` lists exactly what would go.`,
    memo: { [MEMO_SUMMARY]: `PLANNING: removal on ${node}` },
    typedSearchAttributes: new TypedSearchAttributes([
      { key: DatumNode, value: node },
      { key: DatumConditions, value: ['PLANNED_REMOVAL'] },
      { key: DatumStatus, value: 'PLANNING' },
    ]),
  });
  return id;
}

/**
 * Decommission: the node's running loops end (terminated, saying by whom and which item), so
 * none writes again what is about to be removed. Refused while the authority still declares the
 * node: the next rollout would bring it back.
 */
export async function endNodeLoops(
  c: Client,
  authority: DesiredStateAuthority,
  input: { node: string; item: string; by: string },
): Promise<{ ended: string[] }> {
  const read = await authority.read(input.node);
  if (read.ok || read.kind !== 'unknown_node')
    throw ApplicationFailure.nonRetryable(
      withFix(
        `${input.node} is still declared by the authority (${authority.fileFor(input.node)}), and the next rollout would bring it back`,
        `remove desired/nodes/${input.node}.yaml from the authority, then decommission it again`,
      ),
      'StillDeclared',
    );
  const query = `WorkflowType = "${WORKFLOW_TYPES.reconcileNode}" AND ExecutionStatus = "Running" AND ${DatumNode.name} = "${input.node}"`;
  const ended: string[] = [];
  for await (const w of c.workflow.list({ query })) {
    await c.workflow.getHandle(w.workflowId).terminate(`decommissioned by ${input.by} (${input.item})`);
    ended.push(w.workflowId);
  }
  return { ended };
}

/**
 * Keeps each bound intent the controller reads in the ledger store, once per process and key:
 * what a rollback writes back. Never content marked sensitive (it stays in the authority only),
 * and a store that cannot keep it now never fails the read.
 */
export function intentKeeper(ledger: LedgerStore | undefined): (read: AuthorityRead) => Promise<void> {
  const kept = new Set<string>();
  return async (read) => {
    if (!ledger || !read.ok) return;
    const { intent } = read;
    const key = `${intent.node}\u0000${intent.generation}\u0000${intent.digest}`;
    if (kept.has(key) || Object.values(intent.resources).some((r) => r.type === 'file' && r.sensitive === true)) return;
    try {
      await ledger.keepIntent(intent);
      kept.add(key);
    } catch (error) {
      log.warn('the ledger store did not keep a bound intent; a rollback to it will say so', {
        node: intent.node,
        generation: intent.generation,
        error: String(error),
      });
    }
  };
}
