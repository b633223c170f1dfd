/*
 * The one rule for how a path under a node root may be spelled. Desired-state validation
 * (src/schemas/desired.ts) and the agent (src/agent/paths.ts) both judge a path by it; the agent then also
 * checks what is really on disk (symlinked parents), which only it can see.
 */

/**
 * What is wrong with a path's spelling, in the order it is reported: leaving the root outranks
 * being malformed, because it is the finding the agent refuses as PathOutsideRoot.
 */
export type PathSpellingProblem = 'absolute' | 'parent_segment' | 'empty' | 'nul' | 'empty_or_dot_segment';

/** The segments of a path, split on either separator so "a\..\b" cannot pass for one name. */
export function pathSegments(path: string): string[] {
  return path.split(/[\\/]/);
}

/** Whether the path is absolute: "/…", "\…" or a drive letter ("C:"). */
export function isAbsoluteSpelling(path: string): boolean {
  return path.startsWith('/') || path.startsWith('\\') || /^[A-Za-z]:/.test(path);
}

export function hasParentSegment(path: string): boolean {
  return pathSegments(path).includes('..');
}

/**
 * Why a relative path's spelling could leave the node root or is not a plain relative path,
 * or null when it is one. Only the spelling: symlinks on disk are the agent's to check.
 */
export function pathSpellingProblem(path: string): PathSpellingProblem | null {
  if (isAbsoluteSpelling(path)) return 'absolute';
  const segments = pathSegments(path);
  if (segments.includes('..')) return 'parent_segment';
  if (path.length === 0) return 'empty';
  if (path.includes('\0')) return 'nul';
  if (segments.some((s) => s === '' || s === '.')) return 'empty_or_dot_segment';
  return null;
}

/** Top-level names under a node root that belong to Datum itself and may not be written as files. */
export const RESERVED_ROOT_ENTRIES = ['.datum', 'releases', 'current', 'flags'];

/**
 * Why a path would not stay inside a node's root, or null when it does. Checked when desired
 * state is validated and again on the agent (which also resolves symlinks).
 */
export function nodePathProblem(path: string): string | null {
  const spelling = pathSpellingProblem(path);
  if (spelling) return NODE_PATH_PROBLEMS[spelling](path);
  const top = pathSegments(path)[0];
  if (top !== undefined && RESERVED_ROOT_ENTRIES.includes(top)) return `"${path}" is inside "${top}", which Datum manages itself`;
  return null;
}

const NODE_PATH_PROBLEMS: Record<PathSpellingProblem, (path: string) => string> = {
  absolute: (path) => `"${path}" is absolute and would leave the node root`,
  parent_segment: (path) => `"${path}" has a ".." segment and could leave the node root`,
  empty: () => 'is empty',
  nul: () => 'contains a NUL byte',
  empty_or_dot_segment: (path) => `"${path}" has an empty or "." segment`,
};
