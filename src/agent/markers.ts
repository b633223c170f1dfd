import type { Stats } from 'node:fs';

export { sameMarker } from '../domain/markers';

/*
 * Change markers: the cheap fingerprint of what is at a resource, recorded with every
 * observation and every write (marker_after), and compared by the watch. One module spells
 * them, so an observation, the marker our own write left and the watch's baseline always agree
 * (compared with sameMarker, which also reads the spelling of agents before this one).
 */

/** Nothing is there. */
export const ABSENT_MARKER = 'absent';

/** Hex digits of the content's sha256 a file's marker carries: enough to see any change of bytes. */
const DIGEST_CHARS = 16;

/**
 * A regular file's: mtime + inode + size + ctime, and the sha256 of its bytes where they were read
 * anyway (observe, apply; not the watch). ctime cannot be set back by a writer, so one that
 * restores mtime (`touch -r`) is still seen; the digest sees a change of bytes within the clock
 * tick ctime is kept in.
 */
export const fileMarker = (st: Pick<Stats, 'mtimeMs' | 'ino' | 'size' | 'ctimeMs'>, sha256?: string) =>
  `file:${st.mtimeMs}:${st.ino}:${st.size}:${st.ctimeMs}${sha256 === undefined ? '' : `:${sha256.slice(0, DIGEST_CHARS)}`}`;

/**
 * A directory's: inode, mode, owner and group, which are all a directory resource's value is
 * about. Not its mtime or ctime: every entry created or removed inside it moves both, so a
 * directory whose files are written (by Datum or by the service using it) would look changed by
 * another writer on every write, and the watch would wake on each. A chmod or chown moves it;
 * one undone before Datum looks changed nothing it could lose.
 */
export const dirMarker = (st: Pick<Stats, 'ino' | 'mode' | 'uid' | 'gid'>) =>
  `dir:${st.ino}:${(st.mode & 0o7777).toString(8)}:${st.uid}:${st.gid}`;

/** A symlink's: its target + ctime (re-pointing a link changes its ctime even to the same target). */
export const linkMarker = (target: string, ctimeMs: number) => `link:${target}:${ctimeMs}`;

/** A service process's: pid + start time (clock ticks since boot), so a reused pid does not match. */
export const serviceMarker = (pid: number, ticks: string) => `pid:${pid}:${ticks}`;

/** Something that should be a symlink but is another kind of entry (`what`): its kind + ctime + inode. */
export const obstructionMarker = (what: string, st: Pick<Stats, 'ctimeMs' | 'ino'>) => `${what}:${st.ctimeMs}:${st.ino}`;

/** The marker the agent's re-check saw at a target; null or undefined where there is none to compare. */
export type CheckedMarker = string | null | undefined;
