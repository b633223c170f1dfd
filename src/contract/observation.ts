/*
 * What the agent read from the node itself: the snapshot every decision is judged on, and the
 * operator decisions the agent keeps per target (docs/architecture.md §3, §4). The agent builds
 * it through its schema (src/schemas/observation.ts), which validates exactly these types: a
 * field added here is added there too, with its default for snapshots from older agents.
 */
import type { Json } from './json';
import type { Mode, OperatorDecisionKind, ResourceType } from './vocabulary';

export type ObservedResource = {
  type: ResourceType;
  /** The observed value in the same shape desiredValue() gives; null = absent / not running. */
  value: Json;
  /** Change marker read from the thing itself (mtime+inode+size, symlink target+ctime, pid+start). */
  marker: string | null;
  /** Set when the ordinary path cannot repair this resource without destroying something. */
  obstruction: string | null;
  detail: Record<string, Json>;
};

/** Something on the node that no desired state and no override declares. */
export type UndeclaredResource = {
  resource_key: string;
  type: ResourceType;
  value: Json;
  marker: string | null;
};

/** Who approved an operator's override, why and since when (agent.yaml `overrides`). */
export type Provenance = {
  approved_by: string;
  reason: string;
  since: string;
};

/** Which agent.yaml entry protects a key now, and through which target (null: by the key itself). */
export type Protection = {
  entry: string;
  kind: 'override' | 'observe';
  target: string | null;
};

/** One sighting of another writer: the time, the value and marker seen, and who saw it. */
export type WriterEvidence = {
  at: string;
  value: Json;
  marker: string | null;
  source: string;
};

/**
 * An operator decision the agent keeps per target across generations: a yield, or an open
 * conflict, about the resource spec with this digest (docs/architecture.md §4 "Targets and
 * operator decisions").
 */
export type OperatorDecision = {
  /** The key that claimed the target when the decision was recorded. */
  resource_key: string;
  target: string;
  kind: OperatorDecisionKind;
  spec_digest: string;
  /**
   * What Datum would write to the target when the decision was taken (valueDigest): a spec spelled
   * another way that writes the same is the same decision. Null in records from before it was kept.
   */
  value_digest: string | null;
  generation: number | null;
  by: string;
  at: string;
  note: string | null;
  /** A conflict's evidence of the other writer. */
  sequence: WriterEvidence[];
};

/**
 * An operator's move of the node's generation fence back down (`datum agent reset-fence`): when,
 * who, why, and from which generation to which. The agent keeps the last one in
 * <root>/.datum/fence.json and every one in .datum/fence-resets.jsonl.
 */
export type FenceReset = {
  at: string;
  by: string;
  reason: string;
  from: number;
  to: number;
};

export type Observation = {
  node_id: string;
  observed_at: string;
  heartbeat_at: string | null;
  mode: Mode;
  resource_modes: Record<string, Mode>;
  /** Local overrides; null provenance means an override was found without proof of who owns it. */
  overrides: Record<string, Provenance | null>;
  resources: Record<string, ObservedResource>;
  undeclared: UndeclaredResource[];
  config_error: string | null;
  /** Per key: the agent.yaml entries that protect it (by its target or by name). Empty from older agents. */
  protections: Record<string, Protection[]>;
  /** Per current key: the operator decision the agent holds for the target it claims. */
  decisions: Record<string, OperatorDecision>;
  /** The last reset of the node's fence, as the agent keeps it; null when there was none, and from older agents. */
  fence_reset: FenceReset | null;
};
