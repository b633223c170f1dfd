/*
 * Desired state as it crosses from the authority to the loop and on to the agent: the resource
 * specs of desired/nodes/<node>.yaml with the policy's defaults applied, bound to its digest and
 * provenance. The file's own format (what a person may leave out) is its schema's:
 * src/schemas/desired.ts, which validates exactly these types (docs/architecture.md §2).
 */
import type { Json } from './json';

export type ReleaseSpec = {
  type: 'release';
  version: string;
  /** A path under the fleet directory, an absolute path or an http(s) URL. */
  artifact: string;
  /** Hex sha256 of the archive. */
  sha256: string;
};

/*
 * A file and a directory may declare mode, owner and group, each optional and never defaulted (a
 * spec that declares none keeps the digest and the observed value it had): `mode` as four octal
 * digits ("0640", the one stored spelling), `owner` and `group` as a name or a decimal id
 * ("daemon", "1"), observed in the spelling written (src/domain/resources/attributes.ts).
 */

export type FileSpec = {
  type: 'file';
  /** Relative to the node root. */
  path: string;
  mode?: string;
  owner?: string;
  group?: string;
  /**
   * The content is a secret: the ledger and the CLI show only its digest and size (as for every
   * file) and say so. Optional and never defaulted, so existing digests do not change.
   */
  sensitive?: boolean;
  /** Text, or a mapping or list that Datum writes as JSON. */
  content: string | Record<string, Json> | Json[];
};

export type ServiceSpec = {
  type: 'service';
  /** The key of the node's release resource the service runs from. */
  release: string;
  /** The key of the file resource the service loads as its config. */
  config: string;
  command: string[];
};

export type FlagSpec = {
  type: 'flag';
  /** Never null: null is how an absent flag is observed. */
  value: Json;
};

export type DirectorySpec = {
  type: 'directory';
  /** Relative to the node root. */
  path: string;
  mode?: string;
  owner?: string;
  group?: string;
};

export type ResourceSpec = ReleaseSpec | FileSpec | ServiceSpec | FlagSpec | DirectorySpec;

/** The policy with defaults applied and every duration in its one stored spelling ("60s"). */
export interface Policy {
  observation_ttl: string;
  retry_budget: number;
  backoff: { initial: string; factor: number; max: string };
  resync_interval: string;
  node_timeout: string;
  conflict_window: string;
  /** Event-driven observation: the agent watches what it manages and a change triggers a pass. */
  watch: boolean;
  /**
   * Repeated drift is a writer (src/domain/repeated-drift.ts): how long one target's repairs are
   * remembered, and how many within that horizon Datum makes before the next drift of the target
   * is CONFLICT. Present only when desired state sets them, so the digest of a file that does not
   * is what it was before they existed; read them through writerRule(), which applies defaults.
   */
  writer_horizon?: string;
  writer_repairs?: number;
  /**
   * How long a repair episode may run before Datum stops repairing and hands the node over
   * (BLOCKED, REPAIR_DEADLINE_EXCEEDED). Optional and never defaulted, so the digest of desired
   * state that does not set it is what it was.
   */
  repair_deadline?: string;
}

/** policy.writer_horizon and writer_repairs when desired state does not set them (src/domain/repeated-drift.ts). */
export const WRITER_DEFAULTS = { writer_horizon: '24h', writer_repairs: 3 } as const;

/** Where a generation came from: `{source, revision, author?, loaded_at}`. */
export type DesiredProvenance = {
  source: string;
  /** The git commit, or the file's sha256. */
  revision: string;
  author: string | null;
  loaded_at: string;
};

/** A node's desired state after validation: defaults applied, every reference checked. */
export interface DesiredState {
  node: string;
  generation: number;
  resources: Record<string, ResourceSpec>;
  policy: Policy;
}

/** Desired state bound to its digest and provenance: the only form a decision accepts. */
export interface BoundIntent extends DesiredState {
  digest: string;
  provenance: DesiredProvenance;
  /**
   * Where the agent fetches each release's artifact (absolute path or URL), resolved by the
   * controller when it reads the authority. Outside the digest: the digest binds what the author
   * wrote. Read through artifactLocation (src/domain/resources/release.ts) only.
   */
  locations?: Record<string, string>;
}
