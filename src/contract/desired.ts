/*
 * Desired state as it crosses from the authority to the loop and on to the agent: the resource
 * specs of desired/nodes/<node>.yaml with the policy's defaults applied, bound to its digest and
 * provenance. The file's own format (what a person may leave out) is its schema's:
 * src/schemas/desired.ts, which validates exactly these types (docs/architecture.md §2).
 */
import type { Json } from './json';
import type { SignedIntent } from './trust';

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

export type PackageSpec = {
  type: 'package';
  /** The Debian package name (its target: package:<name>). */
  name: string;
  /** The exact Debian version dpkg must report installed, such as "1.1-1". */
  version: string;
  /**
   * A .deb of exactly that package and version, as for a release: a path under the fleet
   * directory, an absolute path or an http(s) URL. Absent: from the host's configured apt sources.
   */
  artifact?: string;
  /** Hex sha256 of the .deb; present exactly when artifact is. */
  sha256?: string;
};

/**
 * A check that a unit's process answers: liveness only, never evidence that it took its content,
 * so a unit that declares one also declares content whose take-up is proven otherwise. Run only
 * where the host's agent.yaml lists it (allow.probes), within `timeout` (default 2s).
 */
export type UnitProbe =
  | { http: { url: string; status?: number; body?: string }; timeout?: string }
  | { command: string[]; output?: string; timeout?: string };

export type UnitSpec = {
  type: 'unit';
  /** The unit's name with its type ("nginx.service"); a template instance only where agent.yaml allows one. */
  name: string;
  /** The whole unit file, which Datum owns at <units.directory>/<name>. */
  content?: string;
  /** A drop-in, which Datum owns at <units.directory>/<name>.d/50-datum.conf. */
  dropin?: string;
  /** Only true: disabling or stopping destroys something, and is never a repair. */
  enabled?: true;
  active?: true;
  /** Values as `systemctl show` prints them, compared exactly: what must be in effect (read, never set). */
  properties?: Record<string, string | number>;
  /** Keys of file resources whose content the unit's process loads: it must have started after each was written. */
  restart_on?: string[];
  probe?: UnitProbe;
};

export type DirectorySpec = {
  type: 'directory';
  /** Relative to the node root. */
  path: string;
  mode?: string;
  owner?: string;
  group?: string;
};

export type ResourceSpec = ReleaseSpec | FileSpec | ServiceSpec | FlagSpec | DirectorySpec | PackageSpec | UnitSpec;

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
  /** What the node is, for selectors (`labels:`); outside the digest, absent when none are given. */
  labels?: Record<string, string>;
  resources: Record<string, ResourceSpec>;
  policy: Policy;
  /**
   * Until when the document may be acted on (ISO 8601 UTC), as its author wrote it; absent when it
   * does not say. Outside the digest: the same content signed again with a later expiry is the
   * same intent (src/domain/gates.ts closes STALE_INTENT past it; the agent refuses ExpiredIntent).
   */
  expires?: string;
}

/** Desired state bound to its digest and provenance: the only form a decision accepts. */
export interface BoundIntent extends DesiredState {
  digest: string;
  provenance: DesiredProvenance;
  /**
   * Where the agent fetches each artifact (a release's, a package's .deb) as an absolute path or
   * URL, resolved by the controller when it reads the authority. Outside the digest: the digest
   * binds what the author wrote. Read through artifactLocation (src/domain/resources/release.ts) only.
   */
  locations?: Record<string, string>;
  /**
   * The file's exact bytes and its detached signature (desired/nodes/<node>.yaml.sig), when the
   * authority holds one: carried unchanged to every apply, so the node's agent verifies what was
   * signed, never a re-serialisation. Outside the digest; absent for an unsigned file.
   */
  signed?: SignedIntent;
}
