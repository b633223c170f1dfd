import type { Stats } from 'node:fs';

/*
 * Change markers: the cheap fingerprint of what is at a resource, recorded with every
 * observation and every write (marker_after), and compared by the watch. One module spells
 * them, so an observation, the marker our own write left and the watch's baseline always agree.
 */

/** Nothing is there. */
export const ABSENT_MARKER = 'absent';

/** A regular file's: mtime + inode + size, read from the file itself. */
export const fileMarker = (st: Pick<Stats, 'mtimeMs' | 'ino' | 'size'>) => `file:${st.mtimeMs}:${st.ino}:${st.size}`;

/** A symlink's: its target + ctime (re-pointing a link changes its ctime even to the same target). */
export const linkMarker = (target: string, ctimeMs: number) => `link:${target}:${ctimeMs}`;

/** A service process's: pid + start time (clock ticks since boot), so a reused pid does not match. */
export const serviceMarker = (pid: number, ticks: string) => `pid:${pid}:${ticks}`;

/** Something that should be a symlink but is another kind of entry (`what`): its kind + ctime + inode. */
export const obstructionMarker = (what: string, st: Pick<Stats, 'ctimeMs' | 'ino'>) => `${what}:${st.ctimeMs}:${st.ino}`;
