const locks = new Map<string, Promise<unknown>>();

/**
 * Runs `fn` after every earlier call for the same key has finished. Applies on one node are
 * serialised so that fence check, action and fence update are one step (handover between two
 * generations' workflows may send actions concurrently); each record under <root>/.datum/ is
 * read, changed and written under its own key. Shared by every activities instance of this
 * process; one node has one agent process.
 */
export async function withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const before = locks.get(key) ?? Promise.resolve();
  const run = before.then(fn, fn);
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
