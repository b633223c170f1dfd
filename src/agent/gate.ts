/*
 * One agent process can serve many nodes (one Temporal worker per agent.yaml), and their observes
 * and applies share its one event loop and its filesystem threads. Run all at once, each takes as
 * long as all of them together: at 1000 nodes an observe took 47 s and the apply planned from it
 * came 113 s later, past observation_ttl, so the agent refused it (StaleSnapshotRefusal) and the
 * loop observed again, which is more work, not less. The gate runs a few at a time, and a waiting
 * apply goes before a waiting observe: an apply's snapshot is already ageing, while an observe's
 * snapshot is only taken once it runs. A node's own loop runs one observe or apply at a time, so
 * an agent for one node never waits here.
 */

type Work = 'apply' | 'observe';

export class Gate {
  private running = 0;
  private readonly waiting: Record<Work, Array<() => void>> = { apply: [], observe: [] };

  constructor(readonly slots: number) {}

  /** Runs `work` once a slot is free; applies waiting are let in before observes waiting. */
  async run<T>(kind: Work, work: () => Promise<T>): Promise<T> {
    if (this.running < this.slots) this.running++;
    else await new Promise<void>((resolve) => this.waiting[kind].push(resolve));
    try {
      return await work();
    } finally {
      // The slot passes straight to the next waiter, so a newcomer cannot take it in between.
      const next = this.waiting.apply.shift() ?? this.waiting.observe.shift();
      if (next) next();
      else this.running--;
    }
  }

  /** How many run and how many wait. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.apply.length + this.waiting.observe.length };
  }
}

/**
 * The agent process's gate. Eight: the filesystem work goes to libuv's four threads and the rest
 * is this process's one JavaScript thread, so more at once only interleaves them.
 */
export const agentGate = new Gate(8);
