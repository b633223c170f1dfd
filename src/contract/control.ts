/*
 * The controller's activities (task queue datum-control), as the workflows call them.
 * src/activities implements this interface; the workflows proxy it from here, so they import no
 * activity module at all, not even for its types, and the sandbox code compiles without Node's
 * types (tsconfig.sandbox.json).
 */
import type { BoundIntent } from './desired';
import type { LedgerEntry } from './ledger';
import type { OperatorDecision } from './observation';
import type { NodeState } from './signals';
import type { PreparedNode } from './workflows';

/** The authority's answer for one node: a bound intent, or why there is none. */
export type AuthorityRead =
  { ok: true; intent: BoundIntent } | { ok: false; kind: 'unknown_node' | 'invalid' | 'unreadable'; error: string };

export interface NodeStateReport {
  workflow_id: string;
  state: NodeState | null;
  error: string | null;
}

export interface ControlActivities {
  /** Runs as a local activity: it only reads the fleet directory next to the worker. */
  readAuthority(node: string): Promise<AuthorityRead>;
  /** Idempotent by (workflow_id, chain_id, seq): a retried append never writes twice. */
  appendLedger(input: { entry: LedgerEntry; chain_id: string }): Promise<'appended' | 'duplicate'>;
  /**
   * Runs as a local activity: the operator decisions (yields, open conflicts) the ledger store
   * holds for a node, so they survive the loss of the agent's own record (operatorDecisionsOf).
   */
  storedDecisions(node: string): Promise<OperatorDecision[]>;
  /** Starts or attaches to each node's reconcileNode at the generation, handing over from older ones. */
  prepareRolloutNodes(input: { generation: number; nodes: string[] }): Promise<PreparedNode[]>;
  /** Each workflow's `state`, or null while visibility says it has not settled. */
  nodeStates(workflowIds: string[]): Promise<NodeStateReport[]>;
}
