/*
 * The resync timer a loop keeps across passes (patch keep-resync-timer): a pass woken by evidence
 * leaves it running when it still serves as the next wake (keepsResyncTimer in src/domain), so
 * the history holds one start and one fire per resync, not a cancel and a start per pass.
 */
import { CancellationScope, sleep } from '@temporalio/workflow';
import { keepsResyncTimer, type Decision } from '../domain';

export interface ResyncTimer {
  /** When it fires, on the workflow clock as it read at its start. */
  readonly dueAt: number;
  fired: boolean;
  readonly cancel: () => void;
}

/** The timer for a wake at `wakeAt`: the one running when it serves, else a new one (the old one cancelled). */
export function resyncTimer(
  running: ResyncTimer | null,
  decision: Decision | null,
  wakeAt: number,
  summary: string,
): ResyncTimer {
  if (running && !running.fired && keepsResyncTimer(decision, running.dueAt, wakeAt)) return running;
  if (running && !running.fired) running.cancel();
  return startTimer(wakeAt, summary);
}

function startTimer(dueAt: number, summary: string): ResyncTimer {
  const scope = new CancellationScope();
  const timer = { dueAt, fired: false, cancel: () => scope.cancel() };
  // Cancelling the scope is the only way the sleep rejects: a timer replaced, nothing to report.
  void scope
    .run(() => sleep(Math.max(0, dueAt - Date.now()), { summary }))
    .then(
      () => {
        timer.fired = true;
      },
      () => undefined,
    );
  return timer;
}
