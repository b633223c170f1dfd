import type { Client } from '@temporalio/client';
import { Runtime } from '@temporalio/worker';
import {
  DatumNode,
  FLEET_CONDITIONS_METRIC,
  FLEET_LAST_LOOK_METRIC,
  FLEET_LOOK_INTERVAL_METRIC,
  FLEET_WORKFLOW_ID,
  MEMO_INTERVAL,
  MEMO_LOOKED_AT,
  FLEET_NODES_METRIC,
  FLEET_NODES_WITHOUT_LOOP_METRIC,
  WORK_ITEMS_METRIC,
  WORK_STATES,
  WORKFLOW_TYPES,
  workQuery,
} from '../contract';
import { CONDITION_TYPES, STATUSES, durationMs } from '../domain';
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
 * And when the fleet workflow last looked, and how often it looks (watchFleetLook).
 */

/** A gauge of the runtime's meter: a count, or seconds. */
function gauge(name: string, help: string, unit: '1' | 's' = '1') {
  return Runtime.instance().metricMeter.createGauge(name, unit === 's' ? 'float' : 'int', unit, help);
}

const running = `WorkflowType = "${WORKFLOW_TYPES.reconcileNode}" AND ExecutionStatus = "Running"`;

export function startFleetMetrics(
  client: Client,
  /** The nodes the authority declares (desired/nodes/*.yaml); without it, no count of nodes without a loop. */
  declared: (() => Promise<string[]>) | null = null,
  everyMs = 30_000,
): { stop(): void } {
  const nodes = gauge(FLEET_NODES_METRIC, 'Running reconcile loops by DatumStatus, from visibility');
  const conditions = gauge(FLEET_CONDITIONS_METRIC, 'Nodes with each condition type open, from visibility');
  const work = gauge(WORK_ITEMS_METRIC, 'Open work items by state (DatumStatus), from visibility');
  const withoutLoop = gauge(
    FLEET_NODES_WITHOUT_LOOP_METRIC,
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
  const look = watchFleetLook(client, namespace);
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
      look.stop();
    },
  };
}

/** How often the fleet's last look is read: one describe, well within the interval an alert allows. */
const LOOK_EVERY_MS = 10_000;

/**
 * When the fleet workflow last looked, and its interval, from its memo (a describe: no worker
 * needed, so it answers for a fleet workflow that is stuck or ended too). Not started yet, or
 * Temporal away: the gauges keep the last look, which ages, and the alert fires on its age.
 */
function watchFleetLook(client: Client, namespace: string): { stop(): void } {
  const lastLook = gauge(
    FLEET_LAST_LOOK_METRIC,
    'When the fleet workflow last looked at the fleet (Unix time), from its memo',
    's',
  );
  const interval = gauge(FLEET_LOOK_INTERVAL_METRIC, 'How often the fleet workflow looks, from its memo', 's');
  const read = async () => {
    try {
      const memo = (await client.workflow.getHandle(FLEET_WORKFLOW_ID).describe()).memo ?? {};
      const [at, every] = [memo[MEMO_LOOKED_AT], memo[MEMO_INTERVAL]];
      if (typeof at === 'string' && Number.isFinite(Date.parse(at))) lastLook.set(Date.parse(at) / 1000, { namespace });
      if (typeof every === 'string') interval.set(durationMs(every) / 1000, { namespace });
    } catch {
      // Never started, or Temporal away for a moment: the next read tries again.
    }
  };
  const timer = setInterval(() => void read(), LOOK_EVERY_MS);
  timer.unref();
  void read();
  return { stop: () => clearInterval(timer) };
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
