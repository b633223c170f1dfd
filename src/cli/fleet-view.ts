import type { Client } from '@temporalio/client';
import {
  CONTROL_TASK_QUEUE,
  FLEET_WORKFLOW_ID,
  MEMO_INTERVAL,
  MEMO_LOOKED_AT,
  fleetViewQuery,
  withFix,
  type FleetCondition,
  type FleetCounts,
  type FleetView,
  type LoopEnd,
  type MissingLoop,
} from '../contract';
import { fleetWatched, mergeFleetConditions } from '../domain';
import { DesiredStateAuthority } from '../activities/authority';
import { lookAtFleet, lookMemory } from '../activities/fleet';
import { fleetDirFrom } from './dirs';
import { workflowPollersOn } from '../worker/fleet-loops';

/*
 * What `datum status` and `datum nodes` know of the fleet beyond the running loops: the fleet
 * workflow's view (src/workflows/fleet.ts), read by its `view` query, so no command needs the fleet
 * directory; or, with --fleet DIR (or DATUM_FLEET), the same look run here against that directory.
 * And whether anyone watches: a controller polling datum-control, and a fleet workflow that looked
 * within its interval. A fleet nobody looks at is reported as unwatched, never as right.
 */

export { FLEET_CONDITION_TYPES } from '../contract';
export const NO_RUNNING_LOOP = 'NO_RUNNING_LOOP';

/** How long a query of the fleet workflow may take before the view counts as unreadable. */
const QUERY_DEADLINE_MS = 10_000;

/** Whether the fleet is watched, and if not since when and why (a sentence with its fix). */
export interface Watch {
  watched: boolean;
  /** When the fleet was last looked at (the fleet workflow's memo, or this command's own look); null: never. */
  looked_at: string | null;
  interval: string | null;
  /** Controller workers seen polling datum-control within the last 90 s. */
  controllers: number;
  /** Since when nobody watches (the last look, or the last poll seen), when unwatched. */
  since: string | null;
  problem: string | null;
}

/** The fleet's view as a command reads it: the fleet workflow's, or this command's own look at --fleet DIR. */
export interface FleetReading {
  /** The fleet directory looked at, null when the view is the fleet workflow's. */
  fleet: string | null;
  counts: FleetCounts | null;
  conditions: FleetCondition[];
  watch: Watch;
}

/** --fleet or DATUM_FLEET, checked when given; null: read the fleet workflow's view. */
export function fleetOverride(flag: string | undefined): string | null {
  return flag !== undefined || process.env.DATUM_FLEET ? fleetDirFrom(flag) : null;
}

/** The fleet's view and whether it is watched. */
export async function readFleet(client: Client, fleetDir: string | null): Promise<FleetReading> {
  const [controllers, fleet] = await Promise.all([controllersPolling(client), fleetWorkflow(client)]);
  const now = new Date().toISOString();
  let view: FleetView | null = null;
  let unreadable: string | null = null;
  if (fleetDir === null && controllers.count > 0 && fleet.running) {
    try {
      view = await client.connection.withDeadline(Date.now() + QUERY_DEADLINE_MS, () =>
        client.workflow.getHandle(FLEET_WORKFLOW_ID).query(fleetViewQuery),
      );
    } catch (error) {
      unreadable = (error as Error).message;
    }
  }
  const lookedAt = view?.looked_at ?? fleet.looked_at;
  const watch = judgeWatch({ controllers, fleet, lookedAt, unreadable, now });
  if (fleetDir !== null) {
    const look = await lookAtFleet(client, new DesiredStateAuthority(fleetDir), lookMemory(), null);
    return {
      fleet: fleetDir,
      counts: look.counts,
      conditions: mergeFleetConditions([], look.conditions ?? [], look.looked_at),
      watch,
    };
  }
  return { fleet: null, counts: view?.counts ?? null, conditions: view?.conditions ?? [], watch };
}

interface FleetWorkflowSeen {
  running: boolean;
  /** What became of it when it is not running: "terminated at …", "never started". */
  ended: string | null;
  looked_at: string | null;
  interval: string | null;
}

async function fleetWorkflow(client: Client): Promise<FleetWorkflowSeen> {
  try {
    const d = await client.workflow.getHandle(FLEET_WORKFLOW_ID).describe();
    const memo = d.memo ?? {};
    const text = (v: unknown) => (typeof v === 'string' ? v : null);
    const running = d.status.name === 'RUNNING';
    const ended = running ? null : `${d.status.name.toLowerCase()}${d.closeTime ? ` at ${d.closeTime.toISOString()}` : ''}`;
    return { running, ended, looked_at: text(memo[MEMO_LOOKED_AT]), interval: text(memo[MEMO_INTERVAL]) };
  } catch (error) {
    if ((error as Error).name !== 'WorkflowNotFoundError') throw error;
    return { running: false, ended: 'never started', looked_at: null, interval: null };
  }
}

/** Controller workers polling datum-control for workflow tasks, and when the last one was seen. */
const controllersPolling = (client: Client) => workflowPollersOn(client, CONTROL_TASK_QUEUE);

const START_WORKER = 'start a controller worker (`datum worker`) on datum-control: it starts the fleet workflow and looks';

function judgeWatch(i: {
  controllers: { count: number; last: string | null };
  fleet: FleetWorkflowSeen;
  lookedAt: string | null;
  unreadable: string | null;
  now: string;
}): Watch {
  const { controllers, fleet, lookedAt } = i;
  const base = { looked_at: lookedAt, interval: fleet.interval, controllers: controllers.count };
  const unwatched = (problem: string, since: string | null): Watch => ({ ...base, watched: false, since, problem });
  if (controllers.count === 0)
    return unwatched(
      withFix(
        `no controller worker polls ${CONTROL_TASK_QUEUE}${controllers.last ? ` (the last poll was at ${controllers.last})` : ''}`,
        START_WORKER,
      ),
      lookedAt ?? controllers.last,
    );
  if (!fleet.running)
    return unwatched(withFix(`the fleet workflow ${FLEET_WORKFLOW_ID} is not running (${fleet.ended})`, START_WORKER), lookedAt);
  if (i.unreadable !== null)
    return unwatched(
      withFix(
        `the fleet workflow does not answer (${i.unreadable})`,
        'check the controller workers on datum-control (their logs say why a workflow task fails)',
      ),
      lookedAt,
    );
  if (!fleetWatched(lookedAt, fleet.interval ?? '60s', i.now))
    return unwatched(
      withFix(
        lookedAt
          ? `the fleet workflow has not looked since ${lookedAt} (it looks every ${fleet.interval})`
          : 'the fleet workflow has not looked yet',
        'check the controller workers on datum-control: a look that fails or waits is in their logs',
      ),
      lookedAt,
    );
  return { ...base, watched: true, since: null, problem: null };
}

/** A node with desired state and no running loop, as `datum nodes` prints it. */
export interface NodeWithoutLoop extends MissingLoop {
  desired_generation: number | null;
  since: string;
  message: string;
}

/** The NO_RUNNING_LOOP conditions of a reading, as `datum nodes` rows. */
export function withoutLoop(conditions: FleetCondition[]): NodeWithoutLoop[] {
  return conditions
    .filter((c) => c.type === NO_RUNNING_LOOP)
    .map((c) => {
      const e = (c.evidence ?? {}) as { desired_generation?: number | null; end?: LoopEnd; last_loop?: MissingLoop['last_loop'] };
      return {
        node: c.node,
        end: e.end ?? 'NEVER_STARTED',
        last_loop: e.last_loop ?? null,
        desired_generation: e.desired_generation ?? null,
        since: c.since,
        message: c.message,
      };
    });
}

/** The words a text table shows for how the node lost its loop. */
export function endWords(n: Pick<MissingLoop, 'end'>): string {
  return n.end === 'NEVER_STARTED' ? 'never rolled out' : n.end.toLowerCase().replace('_', ' ');
}

/** The line a command prints under its report when nobody watches the fleet. */
export function unwatchedLine(w: Watch): string {
  return `The fleet is UNWATCHED${w.since ? ` since ${w.since}` : ''}: ${w.problem ?? 'nobody looks at it'}`;
}
