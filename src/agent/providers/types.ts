import type { AgentConfig, Json, ObservedResource } from '../../domain';

/** The node an activity works on: its name and the real path of its root. */
export interface NodeContext {
  node: string;
  /** Real path of the node root (symlinks resolved); every path a provider touches is inside it. */
  root: string;
  /** agent.yaml's `services` as read for this apply (how a service is started); absent: the process backend. */
  services?: AgentConfig['services'];
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
 * has run. Everything before the step (a fetch, an unpack) stays as it is.
 */
export type AtWrite = <T>(step: () => Promise<T>) => Promise<T>;

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
