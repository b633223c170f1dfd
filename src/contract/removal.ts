/*
 * Planned removals (docs/operations.md, "Removing things"): why a removal is planned, what the
 * node's agent would remove, each target as it is now, and what an approval did. The work item
 * that carries a plan is in work.ts.
 */
import type { DecisionAuthor } from './trust';

/** Why a removal is planned: resources the node's newest generation no longer declares, or the node leaving the fleet. */
export type RemovalCause =
  { kind: 'dropped'; generation: number } | { kind: 'decommission'; by: string; note: string | null; at: string };

/** One target the agent would remove, as it read it when planning. */
export interface RemovalTarget {
  /** Datum's name of it: file:<path>, flag:<name>. */
  target: string;
  type: 'file' | 'flag';
  /** The key that last claimed it, and from which generation. */
  resource_key: string;
  claimed_generation: number | null;
  /** Where it is under the node's root. */
  path: string;
  size: number;
  sha256: string;
  /** The change marker read when planning: the removal is refused if it moved since. */
  marker: string;
  /** Why the node's agent.yaml keeps the agent from removing it now; null when it would. */
  refused: string | null;
}

export interface RemovalPlan {
  cause: RemovalCause;
  planned_at: string;
  /** The newest generation the node's agent had accepted when it planned. */
  generation: number | null;
  targets: RemovalTarget[];
  /** What Datum holds on the node and leaves in place, and why (absent already, a type the agent does not remove, protected). */
  kept: Array<{ target: string; why: string }>;
  /** What the approval did, once carried out. */
  done: RemovalResult | null;
}

/** What the node's agent removed for one approval, and where it kept each one's bytes. */
export interface RemovalResult {
  /** The approval's key (the item and its run): a second request with it removes nothing. */
  key: string;
  at: string;
  /** Answered from the agent's record: this approval was carried out before, and nothing was done now. */
  replayed: boolean;
  removed: Array<{ target: string; path: string; size: number; sha256: string; backup: string }>;
  /** The agent's append-only record of removals, under the node's root. */
  record: string;
  /** Who approved, as the host established it: proven by an operator key, or declared. Absent from older agents. */
  author?: DecisionAuthor;
}

export const removalItemId = (node: string, cause: RemovalCause) =>
  `datum-work/${node}/PLANNED_REMOVAL/${cause.kind === 'dropped' ? `gen-${cause.generation}` : 'decommission'}`;
