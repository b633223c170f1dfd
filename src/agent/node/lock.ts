const locks = new Map<string, Promise<unknown>>();

/**
 * Runs `fn` after every earlier call for the same key has finished. Applies on one node are
 * serialised so that fence check, action and fence update are one step (handover between two
 * generations' workflows may send actions concurrently); each record under <root>/.datum/ is
 * read, changed and written under its own key. Shared by every activities instance of this
 * process; one node has one agent process.
 */
export async function withLock<T>(key: string, fn: () => Promise<T>, label = ''): Promise<T> {
  const before = locks.get(key) ?? Promise.resolve();
  lockProbe?.({ key, label, phase: 'waiting' });
  const entered = () => {
    lockProbe?.({ key, label, phase: 'running' });
    return fn();
  };
  const run = before.then(entered, entered);
  const settled = run.then(
    () => undefined,
    () => undefined,
  );
  locks.set(key, settled);
  try {
    return await run;
  } finally {
    if (locks.get(key) === settled) locks.delete(key);
  }
}

/** One step of a call through withLock, as the test seam below reports it. */
interface LockEvent {
  key: string;
  /** What the caller does under the lock ("accept 12", "advance 13", "write 12"); '' if unnamed. */
  label: string;
  /** `waiting`: queued behind earlier calls for the key; `running`: its turn came. */
  phase: 'waiting' | 'running';
}

/**
 * A seam for tests, null (nothing called) in production: told of every call's queueing and turn,
 * so a race test orders its steps by these events instead of by sleeps, and checks afterwards
 * that the interleaving it names is the one that ran (test/agent/cas.test.ts).
 */
let lockProbe: ((event: LockEvent) => void) | null = null;

export function probeLocksForTests(probe: typeof lockProbe): void {
  lockProbe = probe;
}
