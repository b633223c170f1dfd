import type { z } from 'zod';
import { withFix } from '../../contract';
import { FileTooLarge, NotRegularFile } from '../fs';
import type { CheckedMarker } from '../markers';
import { AgentRefusal } from '../refusal';
import type { ActionKind, AuthorizedAction, DestructiveActionKind, Json, ObservedResource, ResourceSpec } from '../../domain';
import type { AgentConfig } from '../../schemas';

/** The node an activity works on: its name and the real path of its root. */
export interface NodeContext {
  node: string;
  /** Real path of the node root (symlinks resolved); every path a provider touches is inside it. */
  root: string;
  /** agent.yaml's `services` as read for this apply (how a service is started); absent: the process backend. */
  services?: AgentConfig['services'];
  /**
   * agent.yaml as read for this call: what the host allows outside the root (`allow`) and how its
   * package and service managers are reached (`packages`, `units`). Absent: nothing is allowed.
   */
  config?: AgentConfig;
  /**
   * The resources the observe was asked about, as the agent reads them: a unit's restart_on names
   * file resources by key, and this says where they are. Absent: not an observe.
   */
  resources?: Record<string, ResourceSpec>;
  /**
   * The identity of the target the agent judged the apply's protections on (src/agent/fs/identity.ts);
   * a file write that resolves anywhere else at its write is refused. Absent: not an apply.
   */
  judged?: string | null;
}

/** What a provider's apply hands back: the change marker its write left, and what it did. */
export interface ApplyResult {
  marker_after: string | null;
  /** One human sentence. */
  detail: string;
}

/**
 * Runs a provider's irreversible step (the rename of a file or flag, the switch of `current`, a
 * service's stop and start) only once the agent has re-checked, under the lock an observe moves
 * the node's fence with, that the action may still write: its generation is not below the fence,
 * and what its plan saw still holds. It throws the refusal instead, and then nothing of the step
 * has run. Everything before the step (a fetch, an unpack) stays as it is. The step gets the
 * target's marker as that re-check read it (the plan's): a provider compares what it is about to
 * replace with it once more, as the very last thing before the swap.
 */
export type AtWrite = <T>(step: (checked: CheckedMarker) => Promise<T>) => Promise<T>;

export type { CheckedMarker } from '../markers';

/**
 * One resource type on the node, as controller-runtime's Reconciler is one small interface: what
 * is there (read from the thing itself), one of its actions carried out, what the action's target
 * is now, and what the watch listens to. The agent looks the type up in one table (./index.ts);
 * nothing else switches on a type. Which of a type's actions the controller may plan, and which
 * are destructive, are the domain's (src/domain/resources/) and the tables must agree
 * (test/unit/resource-tables.test.ts).
 */
export interface Provider<S extends ResourceSpec = ResourceSpec> {
  /** The actions this provider carries out. */
  actions: readonly ActionKind[];
  /** Its actions that would destroy something: the agent refuses them whoever asks (apply, step 5). */
  destructive: readonly DestructiveActionKind[];
  /** The resource as it is now, read from the thing itself, in the shape the domain's desiredValue gives. */
  observe(ctx: NodeContext, key: string, spec: S): Promise<ObservedResource>;
  /** Carries out one of its actions, its irreversible step through `atWrite`. */
  apply(ctx: NodeContext, action: AuthorizedAction, atWrite: AtWrite): Promise<ApplyResult>;
  /** The action's target as observe reads it now: its marker is what compare-and-swap compares. */
  targetNow(ctx: NodeContext, action: AuthorizedAction): Promise<ObservedResource>;
  /** What the watch listens to for a resource of this type (src/agent/watch.ts). */
  watch: WatchHooks<S>;
  /**
   * `datum import`: the spec that declares what is there now under `name` (a path, a package or
   * unit name), read as observe reads it and changing nothing, so a first pass from it finds no
   * drift; or why it cannot be declared (absent, too large, not a kind this type holds). Absent:
   * the type cannot be imported (a release's artifact is not on the node).
   */
  importSpec?(ctx: NodeContext, key: string, name: string): Promise<ImportResult<S>>;
}

/** What `datum import` found for one resource: its spec, or the problem, in a person's words. */
export type ImportResult<S extends ResourceSpec = ResourceSpec> = { spec: S } | { problem: string };

/**
 * How the watch sees a resource change without observing it: a cheap marker, and what wakes it
 * early. `config` is agent.yaml as the watch read it: where a resource outside the root lives
 * (dpkg's packages.root).
 */
export interface WatchHooks<S extends ResourceSpec = ResourceSpec> {
  /** A cheap fingerprint (lstat, readlink, /proc): any change of the resource changes it. */
  marker(root: string, key: string, spec: S, config: AgentConfig): Promise<string>;
  /** Directories whose entries change when the resource does (watched with inotify). */
  dirs(root: string, key: string, spec: S, config: AgentConfig): string[];
  /**
   * Other sources that wake the watch (a child's exit, a unit's start or stop): a function that
   * stops listening, or 'blind' when a change can be seen only by polling (an adopted process).
   */
  wake?(root: string, key: string, spec: S, poke: () => void, config: AgentConfig): Promise<(() => void) | 'blind' | null>;
}

export function observed(
  type: ObservedResource['type'],
  value: Json,
  marker: string | null,
  detail: Record<string, Json>,
  obstruction: string | null = null,
): ObservedResource {
  return { type, value, marker, obstruction, detail };
}

export const short = (hex: string | null | undefined) => (typeof hex === 'string' ? `${hex.slice(0, 12)}…` : String(hex));

/** What to do about a filesystem error (errno) met on one resource, in a person's words. */
const ERRNO_FIX: Record<string, { problem: string; fix: string }> = {
  ENAMETOOLONG: {
    problem: 'a name in its path is longer than the filesystem allows',
    fix: 'shorten the path in the desired state (each segment at most 255 bytes)',
  },
  EACCES: { problem: 'the agent may not read or search it', fix: "give the agent's user access to the path" },
  EPERM: { problem: 'the agent is not permitted to touch it', fix: "give the agent's user access to the path" },
  ELOOP: {
    problem: 'it leads through too many symlinks, or through one where Datum does not follow',
    fix: 'replace the symlinks on its path by real directories',
  },
  EIO: { problem: 'the disk answered with an I/O error', fix: "check the node's disk and its kernel log" },
  ENOTDIR: { problem: 'a part of its path is not a directory', fix: 'make every parent of the path a directory' },
  ESTALE: { problem: 'it is on a network filesystem that lost it', fix: 'remount the filesystem' },
};

/**
 * A provider's observe of one resource, where any filesystem error of that resource (an errno:
 * a segment longer than the filesystem allows, a permission, an I/O error) becomes that
 * resource's finding, naming the errno and the fix, never the failure of the whole observe: one
 * bad path leaves the node's other resources observed and repaired.
 */
export async function observeGuarded(
  type: ObservedResource['type'],
  detail: Record<string, Json>,
  observe: () => Promise<ObservedResource>,
): Promise<ObservedResource> {
  try {
    return await observe();
  } catch (err) {
    if (err instanceof NotRegularFile || err instanceof FileTooLarge)
      return observed(
        type,
        null,
        null,
        { ...detail, problem: err.message },
        withFix(`${err.message}, where Datum expects one of its own regular files; it was not read`, `remove ${err.shown}`),
      );
    const code = (err as NodeJS.ErrnoException).code;
    if (typeof code !== 'string' || !/^E[A-Z0-9]+$/.test(code)) throw err;
    const known = ERRNO_FIX[code] ?? {
      problem: `the filesystem refused it (${(err as Error).message})`,
      fix: 'see the error; the next pass observes it again',
    };
    return observed(type, null, null, { ...detail, errno: code }, withFix(`${known.problem} (${code})`, known.fix));
  }
}

/** An action's write spec as its provider reads it; a malformed one is refused, never guessed at. */
export function specOf<T>(action: AuthorizedAction, schema: z.ZodType<T>): T {
  const r = schema.safeParse(action.spec);
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => `${i.path.map(String).join('.') || '(spec)'}: ${i.message}`).join('; ');
  throw new AgentRefusal('InvalidAction', withFix(`its spec is malformed (${issues})`, 're-plan from the desired state'));
}

export const now = () => new Date();
