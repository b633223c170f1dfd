import { z } from 'zod';
import type {
  FenceReset,
  Observation,
  ObservedResource,
  OperatorDecision,
  Protection,
  WriterEvidence,
} from '../contract/observation';
import { MODES, OPERATOR_DECISION_KINDS, RESOURCE_TYPES } from '../contract/vocabulary';
import { exactly, jsonValue, nodeId } from './base';
import { provenance } from './desired';

/*
 * The observation as zod schemas: what the agent read from the node itself (src/contract/
 * observation.ts has the types, and what each field means). The agent builds every snapshot
 * through \`observation\`, which fills the defaults of fields older agents did not send; a field
 * added to the format gets its schema here, with such a default.
 */

export const observedResource = exactly<ObservedResource>()(
  z.object({
    type: z.enum(RESOURCE_TYPES),
    /** The observed value in the same shape desiredValue() gives; null = absent / not running. */
    value: jsonValue,
    /** Change marker read from the thing itself (mtime+inode+size, symlink target+ctime, pid+start). */
    marker: z.string().nullable(),
    /** Set when the ordinary path cannot repair this resource without destroying something. */
    obstruction: z.string().nullable().default(null),
    detail: z.record(z.string(), jsonValue).default({}),
  }),
);

/** One sighting of another writer. */
export const writerEvidence = exactly<WriterEvidence>()(
  z.object({ at: z.string(), value: jsonValue, marker: z.string().nullable(), source: z.string() }),
);

/**
 * An operator decision the agent keeps per target across generations: a yield, or an open
 * conflict, about the resource spec with this digest (docs/architecture.md §4 "Targets and
 * operator decisions").
 */
export const operatorDecision = exactly<OperatorDecision>()(
  z.object({
    /** The key that claimed the target when the decision was recorded. */
    resource_key: z.string(),
    target: z.string(),
    kind: z.enum(OPERATOR_DECISION_KINDS),
    spec_digest: z.string(),
    /**
     * What Datum would write to the target when the decision was taken (valueDigest): a spec spelled
     * another way that writes the same is the same decision. Null in records from before it was kept.
     */
    value_digest: z.string().nullable().default(null),
    generation: z.number().int().nullable().default(null),
    by: z.string(),
    at: z.string(),
    note: z.string().nullable().default(null),
    /** A conflict's evidence of the other writer. */
    sequence: z.array(writerEvidence).default([]),
  }),
);

/** Which agent.yaml entry protects a key now, and through which target (null: by the key itself). */
export const protection = exactly<Protection>()(
  z.object({
    entry: z.string(),
    kind: z.enum(['override', 'observe']),
    target: z.string().nullable(),
  }),
);

/** The last reset of the node's fence (`datum agent reset-fence`). */
export const fenceReset = exactly<FenceReset>()(
  z.object({
    at: z.iso.datetime(),
    by: z.string().min(1),
    reason: z.string().min(1),
    from: z.number().int().min(1),
    to: z.number().int().min(1),
  }),
);

export const observation = exactly<Observation>()(
  z.object({
    node_id: nodeId,
    observed_at: z.iso.datetime(),
    heartbeat_at: z.iso.datetime().nullable().default(null),
    mode: z.enum(MODES),
    resource_modes: z.record(z.string(), z.enum(MODES)).default({}),
    /** Local overrides; null provenance means an override was found without proof of who owns it. */
    overrides: z.record(z.string(), provenance.nullable()).default({}),
    resources: z.record(z.string(), observedResource),
    undeclared: z
      .array(
        z.object({ resource_key: z.string(), type: z.enum(RESOURCE_TYPES), value: jsonValue, marker: z.string().nullable() }),
      )
      .default([]),
    config_error: z.string().nullable().default(null),
    /** Per key: the agent.yaml entries that protect it (by its target or by name). Absent from older agents. */
    protections: z.record(z.string(), z.array(protection)).default({}),
    /** Per current key: the operator decision the agent holds for the target it claims. */
    decisions: z.record(z.string(), operatorDecision).default({}),
    /** The last reset of the node's fence; null when there was none, and from older agents. */
    fence_reset: fenceReset.nullable().default(null),
  }),
);
export type ObservationInput = z.input<typeof observation>;
