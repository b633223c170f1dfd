import { clip } from './bounds';

/*
 * The one rule for how a path under a node root may be spelled. Desired-state validation
 * (src/schemas/desired.ts) and the agent (src/agent/fs/paths.ts) both judge a path by it; the agent then also
 * checks what is really on disk (symlinked parents), which only it can see.
 */

/**
 * What is wrong with a path's spelling, in the order it is reported: leaving the root outranks
 * being malformed, because it is the finding the agent refuses as PathOutsideRoot.
 */
export type PathSpellingProblem =
  'absolute' | 'parent_segment' | 'empty' | 'nul' | 'empty_or_dot_segment' | 'segment_too_long' | 'name_too_long' | 'too_long';

/** The longest name a Linux filesystem takes for one path segment (NAME_MAX), in bytes. */
export const MAX_SEGMENT_BYTES = 255;
/**
 * The longest last segment (the file's own name): Datum writes a temp file beside it named
 * ".<name>.datum-tmp-<pid>-<nonce>" (up to 32 bytes more), and keeps backups as
 * "<name>.<timestamp>" (25 more), both of which must still fit NAME_MAX.
 */
export const MAX_NAME_BYTES = MAX_SEGMENT_BYTES - 32;
/**
 * The longest relative path: PATH_MAX (4096 bytes, its NUL included) less room for the node root
 * itself and for ".datum/backup/….<timestamp>", where the previous content is kept.
 */
export const MAX_PATH_BYTES = 3840;

/** The number of bytes `text` takes in UTF-8 (what the kernel counts), without Node's Buffer. */
export function utf8Bytes(text: string): number {
  let bytes = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return bytes;
}

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
  // Longer than the filesystem takes: the write would fail with ENAMETOOLONG on every pass.
  if (utf8Bytes(path) > MAX_PATH_BYTES) return 'too_long';
  if (segments.slice(0, -1).some((s) => utf8Bytes(s) > MAX_SEGMENT_BYTES)) return 'segment_too_long';
  if (utf8Bytes(segments[segments.length - 1] ?? '') > MAX_NAME_BYTES) return 'name_too_long';
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
  too_long: lengthProblem,
  segment_too_long: lengthProblem,
  name_too_long: lengthProblem,
};

/** The sentence for a path too long for the filesystem (too_long, segment_too_long, name_too_long). */
export function lengthProblem(path: string): string {
  const shown = clip(path, 60);
  const segments = pathSegments(path);
  if (utf8Bytes(path) > MAX_PATH_BYTES)
    return `"${shown}" is ${utf8Bytes(path)} bytes long, more than the ${MAX_PATH_BYTES} a path under the node root may have (the filesystem's PATH_MAX of 4096 bytes, less room for the root and Datum's backups)`;
  const long = segments.slice(0, -1).find((s) => utf8Bytes(s) > MAX_SEGMENT_BYTES);
  if (long !== undefined)
    return `"${shown}" has a directory name of ${utf8Bytes(long)} bytes ("${clip(long, 24)}"), more than the ${MAX_SEGMENT_BYTES} bytes a filesystem takes for one name`;
  const name = segments[segments.length - 1] ?? '';
  return `"${shown}" ends in a file name of ${utf8Bytes(name)} bytes, more than the ${MAX_NAME_BYTES} Datum can write (the filesystem takes ${MAX_SEGMENT_BYTES}, and Datum's temp file and backups add to the name)`;
}
