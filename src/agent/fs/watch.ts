import { watch, promises as fs } from 'node:fs';
import path from 'node:path';
import { ABSENT_MARKER, dirMarker, fileMarker, linkMarker } from '../markers';

/*
 * What the watch (src/agent/watch.ts) reads of a node's root between observations: a cheap stamp
 * of a path, and inotify on a directory. Neither reads a byte of content or follows a link.
 */

/** A path's stamp as the watch compares it: a symlink's target and ctime, else the entry's marker; 'absent' when nothing is there. */
export async function pathStamp(abs: string): Promise<string> {
  try {
    const st = await fs.lstat(abs);
    return st.isSymbolicLink() ? linkMarker(await fs.readlink(abs), st.ctimeMs) : fileMarker(st);
  } catch {
    return ABSENT_MARKER;
  }
}

/**
 * The stamp of a path a directory resource names: a directory's marker (inode, mode, owner,
 * group: not its times, which every entry written inside it moves), else what pathStamp says.
 */
export async function dirStamp(abs: string): Promise<string> {
  try {
    const st = await fs.lstat(abs);
    return st.isDirectory() ? dirMarker(st) : await pathStamp(abs);
  } catch {
    return ABSENT_MARKER;
  }
}

/**
 * Calls `onChange` on any change of the directory's entries (of those `only` accepts, by name)
 * until the returned function is called; null when it is not there.
 */
export function watchDir(dir: string, onChange: () => void, only?: (name: string) => boolean): (() => void) | null {
  try {
    // inotify names the entry; a change it cannot name wakes the watch all the same.
    const watcher = watch(dir, { persistent: false }, (_event, name) => {
      if (!only || name === null || only(String(name))) onChange();
    });
    return () => watcher.close();
  } catch {
    return null; // not there yet: the watch's poll covers it
  }
}

/** The subdirectories of `dir` whose names `accept` takes (absolute paths); none when it is not there. */
export async function subdirsOf(dir: string, accept: (name: string) => boolean): Promise<string[]> {
  const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isDirectory() && accept(e.name)).map((e) => path.join(dir, e.name));
}

/** Whether `dir` is a directory now (following links, as a root given in agent.yaml may be one). */
export async function isDirectory(dir: string): Promise<boolean> {
  return (await fs.stat(dir).catch(() => null))?.isDirectory() ?? false;
}

/** Creates `dir` and its parents (the agent's roots, at start). */
export async function makeDirs(dir: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
}
