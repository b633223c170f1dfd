import { asyncLocalStorage } from '@temporalio/activity';
import type { ResourceSpec } from '../domain';
import type { WatchRequest, WatchResult } from '../contract';
import type { AgentConfig } from '../schemas';
import { loadAgentConfig } from './config';
import { watchDir } from './fs';
import { loopHeartbeat } from './heartbeat';
import { keepWatch } from './node/watch-tokens';
import { sameMarker } from './markers';
import { providerFor } from './providers';

/*
 * Event-driven observation: a long-lived, heartbeating activity that returns as soon as
 * something this node manages changes (a file, a flag, the current release, a service's
 * process), so the workflow observes in well under a second instead of at the next resync.
 * It only says *that* something changed; the workflow then takes a real, fresh observation,
 * which is still the only evidence a decision uses. Resync stays as the safety net.
 *
 * The change test is cheap (lstat, readlink, /proc): the marker of each resource against the
 * markers of the loop's last observation (WatchRequest.baseline), then against what the watch
 * read when it started. fs.watch wakes it early, and so does the exit of a service the agent
 * spawned itself (services/exits.ts) and a systemd unit's start or stop (the manager's record of
 * its invocation, providers/unit.ts); a short poll covers what none of them sees (an adopted or
 * systemd service's process dying, a watched directory created later), and a slower one stands
 * guard when they see everything.
 */

/** Poll for what no event shows: an adopted service's process dying, a directory that is not there. */
const POLL_MS = 500;
/**
 * With every watched directory under inotify and no service, the poll is only a safety net, and a
 * slow one: its lstat calls are what an agent serving many virtual nodes spends its CPU on.
 * The watch beats on a poll's turn; WATCH_BEAT_MS is just under this, so every safety turn hands
 * the SDK a beat, which sends one every 4 minutes (src/agent/worker.ts), inside the watch's 5 m
 * heartbeat timeout.
 */
const SAFETY_POLL_MS = 15_000;

/** The marker of a resource as its provider's watch reads it; 'unknown' for a type this agent has no provider for. */
async function markerOf(root: string, key: string, spec: ResourceSpec, config: AgentConfig): Promise<string> {
  return (await providerFor(spec.type)?.watch.marker(root, key, spec, config)) ?? 'unknown';
}

async function markers(
  root: string,
  resources: Record<string, ResourceSpec>,
  config: AgentConfig,
): Promise<Record<string, string>> {
  const entries = await Promise.all(
    Object.entries(resources).map(async ([k, spec]) => [k, await markerOf(root, k, spec, config)] as const),
  );
  return Object.fromEntries(entries);
}

/** Directories whose entries change when a managed resource does (watched with inotify). */
function watchedDirs(root: string, resources: Record<string, ResourceSpec>, config: AgentConfig): string[] {
  const dirs = new Set<string>([root]);
  for (const [key, spec] of Object.entries(resources))
    for (const dir of providerFor(spec.type)?.watch.dirs(root, key, spec, config) ?? []) dirs.add(dir);
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

/** The watch's polls; tests lengthen them to show what wakes a watch without them. */
export interface WatchPolls {
  /** When something is out of inotify's sight (POLL_MS). */
  pollMs: number;
  /** When nothing is (SAFETY_POLL_MS). */
  safetyPollMs: number;
  /** Called each time the watch has read every marker and starts to wait. */
  waiting?: () => void;
}
const POLLS: WatchPolls = { pollMs: POLL_MS, safetyPollMs: SAFETY_POLL_MS };

export async function watchNode(configPath: string, request: WatchRequest, polls: WatchPolls = POLLS): Promise<WatchResult> {
  const config = await loadAgentConfig(configPath);
  const root = config.root;
  const ctx = asyncLocalStorage.getStore();
  const baseline = await markers(root, request.resources, config);
  // What the loop last observed, where it says: a change since that observation counts.
  const supplied = sinceObservation(baseline, request.baseline);
  if (supplied.length > 0) return { changed: supplied, at: new Date().toISOString(), reason: 'changed since observation' };
  // Until it ends, an agent started again on this root after this one died ends it (watch-tokens.ts).
  const forget = ctx ? await keepWatch(root, ctx) : () => Promise.resolve();
  const wakeup = new Wakeup();
  const sources = await wakeSources(root, request.resources, config, wakeup.poke);
  // The short poll only for what the wake sources cannot see: an agent serving many virtual
  // nodes would otherwise lstat thousands of paths a second.
  const pollMs = sources.blind ? polls.pollMs : polls.safetyPollMs;
  const deadline = Date.now() + request.window_ms;
  const beat = loopHeartbeat();
  // One listener for the whole watch (not one per poll, which would pile up for ten minutes).
  ctx?.cancellationSignal.addEventListener('abort', wakeup.poke);
  try {
    for (;;) {
      if (ctx?.cancellationSignal.aborted) return { changed: [], at: new Date().toISOString(), reason: 'cancelled' };
      const now = await markers(root, request.resources, config);
      const changed = Object.keys(now).filter((k) => !sameMarker(now[k], baseline[k]));
      if (changed.length > 0) return { changed, at: new Date().toISOString(), reason: 'changed' };
      if (Date.now() >= deadline) return { changed: [], at: new Date().toISOString(), reason: 'window elapsed' };
      beat();
      polls.waiting?.();
      await wakeup.wait(Math.min(pollMs, deadline - Date.now()));
    }
  } finally {
    ctx?.cancellationSignal.removeEventListener('abort', wakeup.poke);
    sources.close();
    await forget();
  }
}

/**
 * What wakes the watch before its poll: inotify on each watched directory, and what each provider
 * listens to (the exit of a service instance that is this agent's child). `blind` when something
 * is out of their sight (a directory not there yet, an instance the agent adopted or systemd
 * runs): then the short poll.
 */
async function wakeSources(
  root: string,
  resources: Record<string, ResourceSpec>,
  config: AgentConfig,
  poke: () => void,
): Promise<{ blind: boolean; close: () => void }> {
  const closers: Array<() => void> = [];
  let blind = false;
  for (const dir of watchedDirs(root, resources, config)) {
    const stop = watchDir(dir, poke);
    if (stop) closers.push(stop);
    else blind = true;
  }
  for (const [key, spec] of Object.entries(resources)) {
    const wake = await providerFor(spec.type)?.watch.wake?.(root, key, spec, poke, config);
    if (wake === 'blind') blind = true;
    else if (typeof wake === 'function') closers.push(wake);
  }
  return { blind, close: () => closers.forEach((close) => close()) };
}

/** Waits for a poll's time or a poke; a poke that comes while the loop reads markers ends its next wait. */
class Wakeup {
  private wake: (() => void) | null = null;
  private due = false;

  readonly poke = (): void => {
    if (this.wake) this.wake();
    else this.due = true;
  };

  wait(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      // Let a burst of writes (temp file + rename) settle before reading markers.
      const settle = () => {
        clearTimeout(timer);
        this.wake = null;
        setTimeout(resolve, 20);
      };
      const timer = setTimeout(
        () => {
          this.wake = null;
          resolve();
        },
        Math.max(0, ms),
      );
      if (this.due) {
        this.due = false;
        settle();
      } else this.wake = settle;
    });
  }
}
