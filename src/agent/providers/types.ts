import { withFix } from '../../contract';
import { FileTooLarge, NotRegularFile } from '../held';
import type { Json, ObservedResource } from '../../domain';
import type { AgentConfig } from '../../schemas';

/** The node an activity works on: its name and the real path of its root. */
export interface NodeContext {
  node: string;
  /** Real path of the node root (symlinks resolved); every path a provider touches is inside it. */
  root: string;
  /** agent.yaml's `services` as read for this apply (how a service is started); absent: the process backend. */
  services?: AgentConfig['services'];
  /**
   * The identity of the target the agent judged the apply's protections on (src/agent/identity.ts);
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

/** The marker the agent's re-check saw at the target; null or undefined where there is none to compare. */
export type CheckedMarker = string | null | undefined;

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
