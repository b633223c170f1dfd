import type { Json } from '../canonical';
import type { Assessment } from '../assessment';
import type { BoundIntent, ResourceSpec } from '../../contract/desired';
import type { ActionKind, DestructiveActionKind, ResourceType } from '../../contract/vocabulary';

/*
 * One resource type as the controller's domain knows it (the agent's side is its provider,
 * src/agent/providers/). Everything that differs between types is a field here; plan, targets,
 * values, classification and desired-state checks read the table (./index.ts) and never switch on
 * a type themselves. In the manner of gitops-engine's pkg/health: one lookup, one file per kind.
 */

/** An action's write spec, as the agent receives it (a JSON object whose fields are the type's own). */
export type WriteSpec = { readonly [field: string]: Json | undefined };

/** Another resource of the same desired state that this one names, and the type it must have. */
export interface Reference {
  field: string;
  key: string;
  type: ResourceType;
}

export interface ResourceKind<S extends ResourceSpec = ResourceSpec> {
  /** Where its actions go in a plan: releases first, then what services read, then the services. */
  order: number;
  /** The actions its plans are made of; the agent's provider of this type carries out exactly these. */
  actions: readonly ActionKind[];
  /**
   * What its `artifact` is and how one is built, for a type that has one: named by the fix when
   * the file is missing or is not the bytes its sha256 names (the controller, datum validate).
   */
  artifact?: { what: string; build: string };
  /** The actions that would destroy something of this type: never planned by a repair, refused by every agent. */
  destructive: readonly DestructiveActionKind[];
  /** What its write touches (docs/architecture.md §4 "Targets and operator decisions"). */
  target(key: string, spec: S): string;
  /** The same target, read from an action's write spec (what the agent is about to touch); null when it does not say. */
  targetOfAction(resourceKey: string, spec: WriteSpec): string | null;
  /**
   * Whether its target is named after its resource key (a flag, a service): a renamed key is then
   * another target. Where the target comes from the spec (a path, a package name) a renamed key
   * writes the same one, so an agent.yaml entry whose binding was lost holds it back.
   */
  targetIsKey: boolean;
  /**
   * Whether its target names a path under the root (`<type>:<path>`, a file, a directory): the
   * agent resolves such a target through symlinked parents to where its write lands
   * (src/agent/fs/identity.ts), and two path targets at one place are one thing to own,
   * whatever their types.
   */
  targetIsPath: boolean;
  /** Why `rest` (what follows "<type>:" in an agent.yaml entry) names no target of this type; null when it does. */
  targetNameProblem(entry: string, rest: string): string | null;
  /**
   * Whether an absent value (null) is the thing failing rather than changed: a service that is
   * not running crashed or was stopped, and its restart is a repair, never evidence of a writer.
   */
  absenceIsFailure: boolean;
  /** What a correct node shows, in the shape the agent's provider observes it. */
  desiredValue(key: string, spec: S, resources: Record<string, ResourceSpec>): Json;
  /**
   * What its write puts on its target, whatever the spec's spelling (src/domain/written.ts): an
   * operator's yield and an open conflict are about this value.
   */
  written(key: string, spec: S, resources: Record<string, ResourceSpec>): Json;
  /** The same from an action's write spec; undefined when the spec does not say. */
  writtenByAction(kind: string, spec: WriteSpec): Json | undefined;
  /** The value observe reads once the action's write has landed; undefined when the spec does not say. */
  valueAfter(kind: string, spec: WriteSpec): Json | undefined;
  /**
   * Whether `value` shows the first, irreversible part of the action's write in place though not
   * the rest (a unit file written, the unit not yet restarted): what an attempt that died midway
   * left, which its retry must take for Datum's own write, not another writer's. Absent: an
   * action of this type lands whole or not at all.
   */
  partlyLanded?(kind: string, spec: WriteSpec, value: Json): boolean;
  /** The action that brings the target to its desired value, and everything the agent needs to carry it out. */
  plan(a: Assessment, spec: S, intent: BoundIntent): { action: ActionKind; spec: Json };
  /** The resources whose values its correctness depends on. */
  dependencies(spec: S): string[];
  /** Other resources it names, each of which must exist with the given type. */
  references(spec: S): Reference[];
  /** Its assessment once every key is classified (a service is judged by its inputs' values); absent: as classified. */
  refine?(a: Assessment, spec: S, all: Assessment[]): Assessment;
  /**
   * Fields of its action's write spec that a signed desired-state document does not fix, so the
   * agent's check of a signed action (src/domain/intended.ts) leaves them out: where an artifact
   * is fetched from (the controller resolves it; the sha256 binds the bytes), and what observe is
   * expected to show after (it takes in what an operator owns). Absent: every field is the signer's.
   */
  unsigned?: readonly string[];
  /** The spec as the agent reads and writes it (a release's artifact where the controller resolved it); absent: as written. */
  forAgent?(intent: BoundIntent, key: string, spec: S): S;
}

/** The field `name` of a write spec when it is a string; null otherwise. */
export function stringField(spec: WriteSpec, name: string): string | null {
  const v = spec[name];
  return typeof v === 'string' ? v : null;
}
