import type { Json, ObservedResource } from '../../domain';

/** The node an activity works on: its name and the real path of its root. */
export interface NodeContext {
  node: string;
  /** Real path of the node root (symlinks resolved); every path a provider touches is inside it. */
  root: string;
}

/** What a provider's apply hands back: the change marker its write left, and what it did. */
export interface ApplyResult {
  marker_after: string | null;
  /** One human sentence. */
  detail: string;
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
