/*
 * One agent process can serve many nodes (one Temporal worker per agent.yaml), and their observes
 * and applies share its one event loop and its filesystem threads. Run all at once, each takes as
 * long as all of them together: at 1000 nodes an observe took 47 s and the apply planned from it
 * came 113 s later, past observation_ttl, so the agent refused it (StaleSnapshotRefusal) and the
 * loop observed again, which is more work, not less. The gate runs a few at a time, and a waiting
 * apply goes before a waiting observe: an apply's snapshot is already ageing, while an observe's
 * snapshot is only taken once it runs. A node's own loop runs one observe or apply at a time, so
 * an agent for one node never waits here.
 *
 * Two rules keep one node's trouble its own (issue 30). Each node holds at most its share of the
 * slots, so a node whose work hangs (a huge file, a dead mount) never takes the slots the others
 * need. And a slot is held by an attempt, not by its work: when the attempt ends (its activity is
 * cancelled, timed out or abandoned by the server), the slot is free at once, and the work left
 * behind stops at its next checkpoint (src/agent/fs/cancel.ts).
 */

type Work = 'apply' | 'observe';

interface Waiter {
  kind: Work;
  node: string;
  admit: () => void;
}

/** Why work was refused a slot: its attempt ended while it waited or ran. */
export class AttemptEnded extends Error {
  override readonly name = 'AttemptEnded';
}

export class Gate {
  private running = 0;
  private readonly byNode = new Map<string, number>();
  private readonly waiting: Waiter[] = [];

  /** `perNode`: how many slots one node may hold at once (a quarter of them, at least one). */
  constructor(
    readonly slots: number,
    readonly perNode = Math.max(1, Math.floor(slots / 4)),
  ) {}

  /**
   * Runs `work` for `node` (unnamed: no share applies) once a slot is free and the node holds fewer than its share; applies
   * waiting are let in before observes waiting. With `signal`, an attempt that ends while it waits
   * leaves the queue, and one that ends while it runs frees its slot at once (the work is told
   * through the same signal, and its result is dropped).
   */
  async run<T>(kind: Work, work: () => Promise<T>, options: { node?: string; signal?: AbortSignal } = {}): Promise<T> {
    const node = options.node ?? '';
    const signal = options.signal;
    await this.admit(kind, node, signal);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.running--;
      this.byNode.set(node, (this.byNode.get(node) ?? 1) - 1);
      this.next();
    };
    try {
      const done = work();
      if (!signal) return await done;
      // Dropped if the attempt ends first; its rejection must not go unhandled.
      done.catch(() => undefined);
      return await Promise.race([done, ended(signal)]);
    } finally {
      release();
    }
  }

  private admit(kind: Work, node: string, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(new AttemptEnded('the attempt ended before it reached the gate'));
    const admitted = new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        kind,
        node,
        admit: () => {
          signal?.removeEventListener('abort', leave);
          this.take(node);
          resolve();
        },
      };
      const leave = () => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(new AttemptEnded('the attempt ended while it waited at the gate'));
      };
      signal?.addEventListener('abort', leave, { once: true });
      this.waiting.push(waiter);
    });
    // In line with everyone waiting: let in whoever there is room for, this one included.
    this.next();
    return admitted;
  }

  /** A slot is free, and the node (when named) holds fewer than its share. */
  private room(node: string): boolean {
    return this.running < this.slots && (node === '' || (this.byNode.get(node) ?? 0) < this.perNode);
  }

  private take(node: string): void {
    this.running++;
    this.byNode.set(node, (this.byNode.get(node) ?? 0) + 1);
  }

  /** Lets in as many waiters as there is room for: applies first, then observes, each in arrival order. */
  private next(): void {
    for (const kind of ['apply', 'observe'] as const) {
      for (let i = 0; i < this.waiting.length && this.running < this.slots;) {
        const w = this.waiting[i];
        if (w.kind === kind && this.room(w.node)) {
          this.waiting.splice(i, 1);
          w.admit();
        } else i++;
      }
    }
    for (const [node, n] of this.byNode) if (n <= 0) this.byNode.delete(node);
  }

  /** How many run and how many wait. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }
}

/** Rejects when `signal` aborts: the attempt is over, whatever its work is still doing. */
function ended(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = () => reject(signal.reason instanceof Error ? signal.reason : new AttemptEnded('the attempt ended'));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

/**
 * The agent process's gate. Eight: the filesystem work goes to libuv's four threads and the rest
 * is this process's one JavaScript thread, so more at once only interleaves them. A node may hold
 * two of them.
 */
export const agentGate = new Gate(8);
