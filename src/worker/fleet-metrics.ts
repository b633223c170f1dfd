import type { Client } from '@temporalio/client';
import { Runtime } from '@temporalio/worker';
import {
  DatumNode,
  FLEET_CONDITIONS_METRIC,
  FLEET_NODES_METRIC,
  FLEET_NODES_WITHOUT_LOOP_METRIC,
  WORK_ITEMS_METRIC,
  WORK_STATES,
  WORKFLOW_TYPES,
  workQuery,
} from '../contract';
import { CONDITION_TYPES, STATUSES } from '../domain';
import { LOOP_ENDS, missingLoops } from './fleet-loops';

/*
 * Fleet-wide counts, computed in one place from Temporal visibility (the pattern of
 * kube-state-metrics): how many running reconcile loops are in each status, and how many nodes
 * have each condition type open. A per-process gauge set by each loop goes stale when its
 * workflow ends or moves to another worker; these are read fresh from the search attributes the
 * loops publish (DatumStatus, DatumConditions), one count call per series, every `everyMs`; and how
 * many work items are open in each state (the DatumStatus each item publishes).
 * Every controller worker may publish them: the dashboard and the alerts take max() across.
 * And how many nodes the authority declares that have no running loop at all, by how the last one
 * ended (fleet-loops.ts): one list of the running loops, and one of the missing nodes' last loops.
 */

const running = `WorkflowType = "${WORKFLOW_TYPES.reconcileNode}" AND ExecutionStatus = "Running"`;

export function startFleetMetrics(
  client: Client,
  /** The nodes the authority declares (desired/nodes/*.yaml); without it, no count of nodes without a loop. */
  declared: (() => Promise<string[]>) | null = null,
  everyMs = 30_000,
): { stop(): void } {
  const meter = Runtime.instance().metricMeter;
  const nodes = meter.createGauge(FLEET_NODES_METRIC, 'int', '1', 'Running reconcile loops by DatumStatus, from visibility');
  const conditions = meter.createGauge(
    FLEET_CONDITIONS_METRIC,
    'int',
    '1',
    'Nodes with each condition type open, from visibility',
  );
  const work = meter.createGauge(WORK_ITEMS_METRIC, 'int', '1', 'Open work items by state (DatumStatus), from visibility');
  const withoutLoop = meter.createGauge(
    FLEET_NODES_WITHOUT_LOOP_METRIC,
    'int',
    '1',
    'Nodes with desired state and no running reconcile loop, by how the last one ended, from the authority and visibility',
  );
  // The namespace counted, like core's label; no task_queue or workflow_type: a count is fleet-wide.
  const namespace = client.options.namespace;
  let stopped = false;
  const tick = async () => {
    try {
      for (const status of STATUSES)
        nodes.set((await client.workflow.count(`${running} AND DatumStatus = "${status}"`)).count, { status, namespace });
      for (const type of CONDITION_TYPES)
        conditions.set((await client.workflow.count(`${running} AND DatumConditions = "${type}"`)).count, { type, namespace });
      for (const state of WORK_STATES.filter((s) => s !== 'CLOSED'))
        work.set((await client.workflow.count(workQuery({ states: [state] }))).count, { state, namespace });
      if (declared) {
        const ends = await nodesWithoutLoop(client, await declared());
        for (const end of LOOP_ENDS) withoutLoop.set(ends[end] ?? 0, { end: end.toLowerCase(), namespace });
      }
    } catch {
      // Visibility unavailable for a moment: the gauges keep their last values; the next tick tries again.
    }
  };
  const timer = setInterval(() => void (stopped ? undefined : tick()), everyMs);
  timer.unref();
  void tick();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}

/** How many declared nodes have no running loop, by how the last one ended. */
export async function nodesWithoutLoop(client: Client, declared: string[]): Promise<Partial<Record<string, number>>> {
  const nodes = new Set<string>();
  for await (const w of client.workflow.list({ query: running, pageSize: 1000 }))
    nodes.add(w.typedSearchAttributes.get(DatumNode) ?? w.workflowId.replace(/^datum\/(.+)\/gen-\d+$/, '$1'));
  const counts: Partial<Record<string, number>> = {};
  for (const m of await missingLoops(client, declared, nodes, false)) counts[m.end] = (counts[m.end] ?? 0) + 1;
  return counts;
}
