import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { lstat, readlink } from 'node:fs/promises';
import path from 'node:path';
import { asyncLocalStorage } from '@temporalio/activity';
import type { ResourceSpec } from '../domain';
import type { WatchRequest, WatchResult } from '../contract';
import { loadAgentConfig } from './config';
import { loopHeartbeat } from './heartbeat';
import { keepWatch } from './watch-tokens';
import { ABSENT_MARKER, fileMarker, linkMarker, sameMarker, serviceMarker } from './markers';
import { readServiceState, startTicks } from './services';

/*
 * Event-driven observation: a long-lived, heartbeating activity that returns as soon as
 * something this node manages changes (a file, a flag, the current release, a service's
 * process), so the workflow observes in well under a second instead of at the next resync.
 * It only says *that* something changed; the workflow then takes a real, fresh observation,
 * which is still the only evidence a decision uses. Resync stays as the safety net.
 *
 * The change test is cheap (lstat, readlink, /proc): the marker of each resource against the
 * markers of the loop's last observation (WatchRequest.baseline), then against what the watch
 * read when it started. fs.watch wakes it early; a short poll covers what
 * inotify cannot see (a service's process dying, a watched directory created later), and a
 * slower one stands guard when inotify sees everything.
 */

/** Poll for what inotify cannot see: a service's process dying, a directory that is not there. */
const POLL_MS = 500;
/**
 * With every watched directory under inotify and no service, the poll is only a safety net (at
 * 1000 virtual nodes its lstat calls are a third of the agent's CPU: bench/results/2026-12-01).
 * The watch beats on a poll's turn; WATCH_BEAT_MS is just under this, so every safety turn beats
 * and two beats stay one poll (15 s) apart, inside the 30 s heartbeat timeout.
 */
const SAFETY_POLL_MS = 15_000;

async function markerOf(root: string, key: string, spec: ResourceSpec): Promise<string> {
  const stamp = async (p: string) => {
    try {
      const st = await lstat(p);
      return st.isSymbolicLink() ? linkMarker(await readlink(p), st.ctimeMs) : fileMarker(st);
    } catch {
      return ABSENT_MARKER;
    }
  };
  switch (spec.type) {
    case 'file':
      return stamp(path.join(root, spec.path));
    case 'flag':
      return stamp(path.join(root, 'flags', `${key}.json`));
    case 'release':
      return stamp(path.join(root, 'current'));
    case 'service': {
      const state = await readServiceState(root, key).catch(() => null);
      if (!state) return 'stopped';
      const ticks = await startTicks(state.pid);
      return ticks !== null && ticks === state.start_ticks ? serviceMarker(state.pid, ticks) : 'stopped';
    }
  }
}

async function markers(root: string, resources: Record<string, ResourceSpec>): Promise<Record<string, string>> {
  const entries = await Promise.all(
    Object.entries(resources).map(async ([k, spec]) => [k, await markerOf(root, k, spec)] as const),
  );
  return Object.fromEntries(entries);
}

/** Directories whose entries change when a managed resource does (watched with fs.watch). */
function watchedDirs(root: string, resources: Record<string, ResourceSpec>): string[] {
  const dirs = new Set<string>([root]);
  for (const spec of Object.values(resources)) {
    if (spec.type === 'file') dirs.add(path.dirname(path.join(root, spec.path)));
    if (spec.type === 'flag') dirs.add(path.join(root, 'flags'));
    if (spec.type === 'service') dirs.add(path.join(root, '.datum', 'services'));
  }
  return [...dirs];
}

/** Keys whose marker now differs from the one the loop's last observation reported (string markers only). */
function sinceObservation(now: Record<string, string>, observed: WatchRequest['baseline']): string[] {
  if (!observed || typeof observed !== 'object') return [];
  return Object.keys(now).filter((k) => {
    const seen = Object.hasOwn(observed, k) ? observed[k] : null;
    // The observation's file markers carry the bytes' digest, the watch's do not read them: compared on what both carry.
    return typeof seen === 'string' && !sameMarker(seen, now[k]);
  });
}

export async function watchNode(configPath: string, request: WatchRequest): Promise<WatchResult> {
  const config = await loadAgentConfig(configPath);
  const root = config.root;
  const ctx = asyncLocalStorage.getStore();
  const baseline = await markers(root, request.resources);
  // What the loop last observed, where it says: a change since that observation counts.
  const supplied = sinceObservation(baseline, request.baseline);
  if (supplied.length > 0) return { changed: supplied, at: new Date().toISOString(), reason: 'changed since observation' };
  // Until it ends, an agent started again on this root after this one died ends it (watch-tokens.ts).
  const forget = ctx ? await keepWatch(root, ctx) : () => Promise.resolve();
  const deadline = Date.now() + request.window_ms;
  let wake: (() => void) | null = null;
  const watchers: FSWatcher[] = [];
  let blind = Object.values(request.resources).some((spec) => spec.type === 'service');
  for (const dir of watchedDirs(root, request.resources)) {
    try {
      watchers.push(fsWatch(dir, { persistent: false }, () => wake?.()));
    } catch {
      // Not there yet: the poll covers it.
      blind = true;
    }
  }
  // An agent serving 1000 virtual nodes would otherwise lstat thousands of paths a second (a
  // 2 s poll was 40% of such an agent's CPU in bench/ profiles).
  const pollMs = blind ? POLL_MS : SAFETY_POLL_MS;
  const beat = loopHeartbeat();
  // One listener for the whole watch (not one per poll, which would pile up for ten minutes).
  const onAbort = () => wake?.();
  ctx?.cancellationSignal.addEventListener('abort', onAbort);
  try {
    for (;;) {
      if (ctx?.cancellationSignal.aborted) return { changed: [], at: new Date().toISOString(), reason: 'cancelled' };
      const now = await markers(root, request.resources);
      const changed = Object.keys(now).filter((k) => !sameMarker(now[k], baseline[k]));
      if (changed.length > 0) return { changed, at: new Date().toISOString(), reason: 'changed' };
      if (Date.now() >= deadline) return { changed: [], at: new Date().toISOString(), reason: 'window elapsed' };
      beat();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pollMs);
        wake = () => {
          clearTimeout(timer);
          // Let a burst of writes (temp file + rename) settle before reading markers.
          setTimeout(resolve, 20);
        };
      });
      wake = null;
    }
  } finally {
    ctx?.cancellationSignal.removeEventListener('abort', onAbort);
    for (const w of watchers) w.close();
    await forget();
  }
}
