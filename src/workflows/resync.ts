/*
 * The wake timer a loop keeps across passes (patch keep-wake-timer). A pass woken by evidence
 * (a signal, the watch) leaves it running when it still fires at the next wake (keepsTimer in
 * src/domain), and a CONVERGED pass takes a running resync timer's time as its recheck
 * (onResyncCadence): the history holds one start and one fire per resync, not a cancel and a
 * start per pass, and the ledger says when the loop looks next.
 */
import { CancellationScope, sleep } from '@temporalio/workflow';
import { keepsTimer, type Decision, type WatchState } from '../domain';

export interface WakeTimer {
  /** When it fires, on the workflow clock as it read at its start. */
  readonly dueAt: number;
  /** Started for the resync (the decision's wait was the resync), not for a time the decision set. */
  readonly resync: boolean;
  fired: boolean;
  readonly cancel: () => void;
}

/**
 * The resync ahead, for the pass's decision (PassPorts.resyncAt): the running resync timer's time,
 * or that of the watch that ends at the resync (patch watch-ends-at-resync); null when neither runs.
 */
export function resyncAt(timer: WakeTimer | null, watch: WatchState): string | null {
  const due = timer && !timer.fired && timer.resync ? timer.dueAt : watch.running ? watch.resync_at_ms : null;
  if (due === null || due <= Date.now()) return null;
  return new Date(due).toISOString();
}

/**
 * Whether the running watch is the wake at `wakeAtMs`: it ends at a resync and observes there
 * (patch watch-ends-at-resync), and that resync serves the wake as a kept resync timer would
 * (keepsTimer): then the loop needs no timer of its own.
 */
export function watchIsTheWake(watch: WatchState, decision: Decision | null, wakeAtMs: number): boolean {
  if (!watch.running || watch.resync_at_ms === null) return false;
  return keepsTimer({ due_at_ms: watch.resync_at_ms, resync: true }, decision, wakeAtMs);
}

/** The timer for a wake at `wakeAt`: the one running when it serves, else a new one (the old one cancelled). */
export function wakeTimer(
  running: WakeTimer | null,
  decision: Decision | null,
  wake: { at: number; resync: boolean; summary: string },
): WakeTimer {
  if (running && !running.fired) {
    if (keepsTimer({ due_at_ms: running.dueAt, resync: running.resync }, decision, wake.at)) return running;
    running.cancel();
  }
  return startTimer(wake);
}

function startTimer(wake: { at: number; resync: boolean; summary: string }): WakeTimer {
  const scope = new CancellationScope();
  const timer = { dueAt: wake.at, resync: wake.resync, fired: false, cancel: () => scope.cancel() };
  // Cancelling the scope is the only way the sleep rejects: a timer replaced, nothing to report.
  void scope
    .run(() => sleep(Math.max(0, wake.at - Date.now()), { summary: wake.summary }))
    .then(
      () => {
        timer.fired = true;
      },
      () => undefined,
    );
  return timer;
}
