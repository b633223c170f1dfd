/*
 * The fleet's own view (seed 004: the controller "notices what no owner can see about itself: an
 * owner gone silent"). One `fleet` workflow per namespace, id FLEET_WORKFLOW_ID on datum-control,
 * started by every controller worker (the first start wins, the others attach). Every interval it
 * compares the authority's nodes with the reconcile loops and holds the fleet's conditions:
 * a declared node with no running loop, a loop whose verification is overdue for its policy,
 * a loop for a node the authority no longer declares. `datum status` and `datum nodes` read it
 * (query `view`), so no command needs the fleet directory to tell the truth; its memo says when it
 * last looked, so a fleet nobody looks at is reported as unwatched even with no worker to query.
 * docs/architecture.md §3 "The contract" lists these names.
 */
import type { QueryDefinition, SignalDefinition } from '@temporalio/common';
import type { Json } from './json';
import type { Resolver } from './vocabulary';

export const FLEET_WORKFLOW_ID = 'datum-fleet';
/** How often the fleet workflow looks unless the worker that starts it says otherwise (DATUM_FLEET_INTERVAL). */
export const FLEET_INTERVAL_DEFAULT = '60s';

/**
 * A fleet whose last look is older than its interval and this share of it again (at least
 * FLEET_GRACE_MIN_MS) is unwatched: a look takes a visibility list and a workflow task, which a
 * busy controller may hold back for a few seconds, and a false "unwatched" is an alarm too.
 */
export const FLEET_GRACE_SHARE = 0.5;
export const FLEET_GRACE_MIN_MS = 5_000;

/** The fleet's conditions: what only a view across the loops can see. */
export const FLEET_CONDITION_TYPES = [
  'NO_RUNNING_LOOP',
  'VERIFICATION_OVERDUE',
  'NO_DESIRED_STATE',
  'LOOP_QUEUE_UNSERVED',
] as const;
export type FleetConditionType = (typeof FLEET_CONDITION_TYPES)[number];
export const FLEET_CONDITION_MEANINGS: Record<FleetConditionType, string> = {
  NO_RUNNING_LOOP:
    'the authority declares the node and no reconcile loop runs for it: never rolled out, or its last loop was terminated, cancelled, failed, timed out or handed over to nothing',
  VERIFICATION_OVERDUE:
    "the node's loop runs but has not verified the node within its policy's bound: its worker or its agent is silent",
  NO_DESIRED_STATE: 'a reconcile loop runs for a node the authority no longer declares',
  LOOP_QUEUE_UNSERVED:
    "the node's loop runs on a task queue no controller worker polls (a loop shard no controller serves, or every controller stopped): its next pass waits until one does",
};

/** How a node's last reconcile loop ended, or that it never had one. */
export const LOOP_ENDS = ['NEVER_STARTED', 'TERMINATED', 'FAILED', 'TIMED_OUT', 'CANCELED', 'COMPLETED'] as const;
export type LoopEnd = (typeof LOOP_ENDS)[number];

/** A loop that ended, as visibility and its close event tell it. */
export interface EndedLoop {
  workflow_id: string;
  run_id: string;
  generation: number;
  started_at: string;
  closed_at: string | null;
  /** What ended it, from its close event: who terminated it and why, the failure, the timeout. */
  how: string;
}

/** A declared node without a running loop, and how its last loop ended (null: none ever ran). */
export interface MissingLoop {
  node: string;
  end: LoopEnd;
  last_loop: EndedLoop | null;
}

/** A fleet condition: a Condition about a node, with the loop it is about. */
export interface FleetCondition {
  node: string;
  type: FleetConditionType;
  /** The running loop it is about; for NO_RUNNING_LOOP the node's last loop, null when none ever ran. */
  workflow_id: string | null;
  resource_key: null;
  since: string;
  message: string;
  evidence: Json;
  tried: string[];
  resolver: Resolver;
  needs_judgement: boolean;
}

/** A condition as a look finds it: `since` from its evidence where the evidence has a time, else null (the look's). */
export type FleetConditionDraft = Omit<FleetCondition, 'since'> & { since: string | null };

/** How many declared nodes a look found running, and verified within their bound. */
export interface FleetCounts {
  /** Nodes the authority declares. */
  declared: number;
  /** Declared nodes with a running loop. */
  running: number;
  /** Declared nodes whose loop verified them within its bound: "checked, recently". */
  verified: number;
  /** Running loops in all (a loop for an undeclared node counts here and not above). */
  loops: number;
}

/** The authority as a look read it: how many nodes, and a digest of every node's generation and digest. */
export interface AuthoritySeen {
  nodes: number;
  digest: string;
}

/** What the fleet workflow tells its look: the fingerprint of the conditions it holds. */
export interface FleetLookInput {
  known: string | null;
}

/** One look: the counts always, the conditions only when they differ from `known` (null: unchanged). */
export interface FleetLook {
  looked_at: string;
  counts: FleetCounts;
  authority: AuthoritySeen;
  fingerprint: string;
  conditions: FleetConditionDraft[] | null;
}

/** What the `view` query answers: the fleet as the workflow last looked at it. */
export interface FleetView {
  workflow_id: string;
  task_queue: string;
  interval: string;
  /** When the last look finished (the workflow's clock); null before the first. */
  looked_at: string | null;
  looks: number;
  counts: FleetCounts | null;
  authority: AuthoritySeen | null;
  conditions: FleetCondition[];
  /**
   * What a resolver decided about an open condition, by its work item's id (a `hold`: who and
   * why), shown as the condition's `tried`; dropped when a look no longer finds the condition.
   */
  decisions: Record<string, string>;
}

export interface FleetInput {
  /** A duration such as "60s". */
  interval: string;
  /** Set only by continue-as-new. */
  carry?: FleetCarry;
}

export interface FleetCarry {
  view: FleetView;
  fingerprint: string | null;
  /** Work items the fleet tells until a look without their condition reached them. */
  work: string[];
}

export const fleetViewQuery = { type: 'query', name: 'view' } as QueryDefinition<FleetView, [], 'view'>;
/** Look now rather than at the next interval (`temporal workflow signal --workflow-id datum-fleet --name look`). */
export const fleetLookSignal = { type: 'signal', name: 'look' } as SignalDefinition<[], 'look'>;

/** Memo keys: when the fleet last looked, and its interval (read without a worker: describe). */
export const MEMO_LOOKED_AT = 'looked_at';
export const MEMO_INTERVAL = 'interval';

export type FleetWorkflow = (input: FleetInput) => Promise<void>;
