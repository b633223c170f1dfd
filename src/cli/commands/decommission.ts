import type { WorkflowHandle } from '@temporalio/client';
import { NO_PLAN } from '../../domain/decision-items';
import { withFix, workItemQuery, type RemovalCause, type RemovalWorkflow, type WorkItem } from '../../contract';
import { openRemovalItem } from '../../activities/removals';
import { workEscalateAfter } from '../../activities/work';
import { UsageError, durationFlag, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { checkNode } from '../nodes';
import { print, printDocument } from '../output';
import type { CommandModule } from '../command';
import { printItem } from './work';

/*
 * `datum decommission NODE --by WHO`: the node leaves the fleet (docs/operations.md, "Removing
 * things"). Its desired state must be gone from the authority already; its loops end, and what
 * Datum holds on it becomes a planned removal: a work item that lists exactly what would go.
 * Nothing is removed until someone approves that item.
 */

interface DecommissionRaw extends ConnectionFlags, OutputFlags {
  node?: string;
  by?: string;
  note?: string;
  timeout?: string;
}

interface DecommissionInput {
  values: DecommissionRaw;
  node: string;
  by: string;
  format: OutputFormat;
  timeoutMs: number;
}

export const decommissionCommand: CommandModule<DecommissionRaw, DecommissionInput> = {
  input(values) {
    const by = values.by?.trim();
    if (!by) throw new UsageError(withFix('who decommissions it?', 'say who you are with --by NAME (recorded with the item)'));
    const timeoutMs = values.timeout === undefined ? 60_000 : durationFlag(values.timeout, '--timeout');
    return { values, node: checkNode(values.node), by, format: outputFormat(values), timeoutMs };
  },
  async run({ values, node, by, format, timeoutMs }) {
    return await withTemporal(values, async (client) => {
      const cause: RemovalCause = { kind: 'decommission', by, note: values.note ?? null, at: new Date().toISOString() };
      const id = await openRemovalItem(client, node, cause, workEscalateAfter());
      const handle = client.workflow.getHandle<RemovalWorkflow>(id);
      const item = await planned(handle, timeoutMs);
      if (format !== 'text') printDocument(format, item);
      else if (item === null)
        print(`${id}: ${node}'s agent has not made the plan yet; \`datum work show ${id}\` lists it once it has.`);
      else {
        printItem(item);
        if (item.state !== 'CLOSED')
          print(`\nNothing is removed until someone approves: datum work resolve ${id} --resolution approve --by NAME`);
      }
      // No plan: the decommission was refused (the authority still declares the node) or the agent could not make it.
      return item?.state === 'CLOSED' && item.closed?.detail.startsWith(NO_PLAN) ? 1 : 0;
    });
  },
};

/** The item once its plan is made (or it closed), or null when that takes longer than the timeout. */
async function planned(handle: WorkflowHandle<RemovalWorkflow>, timeoutMs: number): Promise<WorkItem | null> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const { status } = await handle.describe();
    if (status.name !== 'RUNNING') return await handle.result();
    const item = await handle.query(workItemQuery).catch(() => null);
    if (item && item.state !== 'PLANNING') return item;
    await new Promise((r) => setTimeout(r, 500));
  }
  return null;
}
