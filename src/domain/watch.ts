import { WATCH_RULE, type WatchRule } from '../contract/patches';
import { durationMs } from './duration';
import type { BoundIntent } from '../contract/desired';
import type { Observation } from '../contract/observation';
import type { ConvergenceStatus } from '../contract/vocabulary';

/*
 * The loop's watch as one state machine: event-driven observation beside the passes. At most one
 * watch runs at a time; its return with a change wakes the loop for a pass. The workflow feeds
 * every event here and carries out the effects (src/workflows/agents.ts); the rules are tested by
 * table in test/unit/watch.test.ts. A new kind of event (an agent announcing its restart, say) is
 * one more case of WatchEvent and one more row there.
 */

/** The change marker of each resource, as observed; null where there was none. */
export type Markers = Record<string, string | null>;

export interface WatchState {
  /** Watches started so far; the last one is the current watch, whose end is awaited when `running`. */
  started: number;
  running: boolean;
  /** The current watch saw a change since this pass began: the loop passes again. */
  fired: boolean;
  /** No watch starts before this time (epoch ms): the pause after a failed one. */
  retry_at_ms: number;
  /** A watch ended without a change while the loop waits: the wait starts the next one, at retry_at_ms. */
  restart_due: boolean;
  /** The markers of the last observation, the next watch's baseline; null: none to give. */
  baseline: Markers | null;
  /**
   * False right after a watch reported a change against its baseline: the next one goes without.
   * Should the observation and the watch ever spell a marker differently, that costs one extra
   * pass per real change instead of a pass after pass.
   */
  baseline_trusted: boolean;
  /**
   * The snapshot the last watch took after the change it reported (WatchRequest.observe_on_change),
   * for the pass that change wakes to decide on; null once a pass observed, or when there is none.
   */
  handed: Observation | null;
  /** The markers the current watch compares with (its request's baseline); null: what it read first. */
  watching_from: Markers | null;
  /**
   * While the current watch ran, the loop observed the node other than the watch saw it start:
   * the snapshot the watch hands back may have been read before that observation, so it is not
   * handed on (the next pass observes). An observation that found the node as the watch started
   * from leaves it handing back: the change the watch reports came after it.
   */
  overlapped: boolean;
  /**
   * The resync the current watch ends at (epoch ms), observing the node there (patch
   * watch-ends-at-resync): its end is the loop's resync, and the loop keeps no timer for it. Null
   * when the watch ends at its own window.
   */
  resync_at_ms: number | null;
}

export const IDLE_WATCH: WatchState = {
  started: 0,
  running: false,
  fired: false,
  retry_at_ms: 0,
  restart_due: false,
  baseline: null,
  baseline_trusted: true,
  handed: null,
  watching_from: null,
  overlapped: false,
  resync_at_ms: null,
};

export type WatchEvent =
  /** A pass begins: the change a watch reported is being looked at now. */
  | { kind: 'pass' }
  /** The pass observed the node (each resource's marker), or could not (null). */
  | { kind: 'observed'; markers: Markers | null }
  /**
   * The loop waits for evidence: a watch starts if one may. `resync_at_ms`: the wait is for the
   * resync at that time, within a watch's window, and a watch started now ends there and observes.
   */
  | { kind: 'wait'; resync_at_ms?: number }
  /**
   * Watch number `watch` returned: the keys whose marker moved (none: its window ran out, `elapsed`,
   * or its agent shut down), and the snapshot it took after the change, or at the window's end,
   * where it took one.
   */
  | {
      kind: 'ended';
      watch: number;
      changed: readonly string[];
      against_baseline: boolean;
      elapsed?: boolean;
      observation?: Observation;
    }
  /** The loop was bound to other resources (a refreshDesired): a snapshot handed back for the old ones is not theirs. */
  | { kind: 'rebound' }
  /** Watch number `watch` failed: its agent died, missed a heartbeat, or refused. */
  | { kind: 'failed'; watch: number };

export type WatchEffect =
  /**
   * Start watch number `watch`, comparing with `baseline` where given (else with what it reads
   * first); where `ends_at_ms` is given, its window ends then and it observes the node there.
   */
  { kind: 'start'; watch: number; baseline?: Markers; ends_at_ms?: number };

export interface WatchContext {
  now_ms: number;
  policy: BoundIntent['policy'];
  /** The last decision's status (null before the first). */
  status: ConvergenceStatus | null;
  /** Whether a watch rule added after loops were running is in force for this one (the workflow asks patched()). */
  rules: (rule: WatchRule) => boolean;
}

/** The longest a loop goes unwatched after a failed watch, under WATCH_RULE.failureRetriesSoon. */
export const WATCH_RETRY_MAX_MS = 30_000;

/** One event: the next state, and what the workflow must do. */
export function watchStep(
  state: WatchState,
  event: WatchEvent,
  ctx: WatchContext,
): { state: WatchState; effects: WatchEffect[] } {
  switch (event.kind) {
    case 'pass':
      return { state: { ...state, fired: false }, effects: [] };
    case 'observed': {
      const overlapped = state.overlapped || (state.running && !sameMarkers(event.markers, state.watching_from));
      return { state: { ...state, baseline: event.markers, handed: null, overlapped }, effects: [] };
    }
    case 'rebound':
      return { state: { ...state, handed: null }, effects: [] };
    case 'wait':
      return waitStep(state, event.resync_at_ms ?? null, ctx);
    case 'ended':
      if (event.watch !== state.started) return { state, effects: [] };
      return { state: ended(state, event, ctx), effects: [] };
    case 'failed':
      if (event.watch !== state.started) return { state, effects: [] };
      return { state: failed(state, ctx), effects: [] };
  }
}

/** Two observations' markers are the same, key for key; an observation that failed (null) matches nothing. */
function sameMarkers(a: Markers | null, b: Markers | null): boolean {
  if (!a || !b) return false;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].every((k) => Object.hasOwn(a, k) && Object.hasOwn(b, k) && a[k] === b[k]);
}

/**
 * Whether the loop watches at all now: the policy asks for it, and no backoff timer runs (a change
 * the other writer makes must not bring the next repair attempt forward).
 */
function watchWanted(ctx: WatchContext): boolean {
  return ctx.policy.watch && ctx.status !== 'RETRY';
}

/**
 * One watch at a time, not before a failed one's pause is over; a restart no longer wanted is
 * dropped. A watch started for a wait on the resync (`resyncAtMs`, still ahead) ends there.
 */
function waitStep(
  state: WatchState,
  resyncAtMs: number | null,
  ctx: WatchContext,
): { state: WatchState; effects: WatchEffect[] } {
  const wanted = watchWanted(ctx);
  if (wanted && !state.running && ctx.now_ms >= state.retry_at_ms) {
    const watch = state.started + 1;
    const given = state.baseline && state.baseline_trusted ? state.baseline : null;
    const baseline = given ? { baseline: given } : {};
    const endsAt = resyncAtMs !== null && resyncAtMs > ctx.now_ms ? resyncAtMs : null;
    return {
      state: {
        ...state,
        started: watch,
        running: true,
        restart_due: false,
        watching_from: given,
        overlapped: false,
        resync_at_ms: endsAt,
      },
      effects: [{ kind: 'start', watch, ...baseline, ...(endsAt === null ? {} : { ends_at_ms: endsAt }) }],
    };
  }
  if (state.restart_due && (!wanted || state.running)) return { state: { ...state, restart_due: false }, effects: [] };
  return { state, effects: [] };
}

/**
 * A change wakes the loop, with the snapshot the watch took after it when there is one and the
 * loop saw nothing else while the watch ran. So does a watch whose window ran out at the loop's
 * resync (resync_at_ms): that is the resync, and its snapshot the resync pass's, under the same
 * condition; not while a backoff runs, whose time is the retry budget's. A watch that saw nothing
 * (its agent shut down, or its own window ran out) is started again by the wait at once: its
 * baseline, the last observation, still catches a change made in between.
 */
function ended(state: WatchState, event: Extract<WatchEvent, { kind: 'ended' }>, ctx: WatchContext): WatchState {
  const next = { ...state, running: false, baseline_trusted: !event.against_baseline, resync_at_ms: null };
  const handed = event.observation && !state.overlapped ? event.observation : null;
  if (event.changed.length > 0) return { ...next, fired: true, handed };
  if (state.resync_at_ms !== null && event.elapsed === true && watchWanted(ctx)) return { ...next, fired: true, handed };
  if (ctx.rules(WATCH_RULE.failureRetriesSoon)) return { ...next, restart_due: true };
  return next;
}

/**
 * A failed watch is started again after a pause of at most WATCH_RETRY_MAX_MS (the resync interval,
 * if shorter), while the loop waits: the pause keeps an agent that refuses every watch from being
 * asked more than once per pause, and an agent that is away holds the next watch in its queue.
 * Without the rule, the next watch waits one resync interval (resync keeps observing meanwhile).
 */
function failed(state: WatchState, ctx: WatchContext): WatchState {
  const resync = durationMs(ctx.policy.resync_interval);
  if (ctx.rules(WATCH_RULE.failureRetriesSoon)) {
    return {
      ...state,
      running: false,
      resync_at_ms: null,
      retry_at_ms: ctx.now_ms + Math.min(resync, WATCH_RETRY_MAX_MS),
      restart_due: true,
    };
  }
  return { ...state, running: false, resync_at_ms: null, retry_at_ms: ctx.now_ms + resync };
}
