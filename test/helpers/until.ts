// The one way a test waits for something it cannot be told about (a query, a file, a process's
// output, eventually consistent visibility): poll, and on timeout say what was awaited and what
// was seen last, so a failure reads without a rerun.

export interface UntilOptions<T> {
  /** What is awaited, as the timeout error names it: "the agent to start". */
  what: string;
  /** 60 s unless told. */
  timeoutMs?: number;
  /** 200 ms unless told. */
  intervalMs?: number;
  /** When the value read is the one awaited; without it, any truthy value is. */
  accept?: (value: T) => boolean;
  /**
   * 'throw' (the default): an error from `read` fails the wait at once. 'retry': it counts as a
   * value not yet accepted, for reads that fail until what they read exists.
   */
  errors?: 'throw' | 'retry';
  /** More to say on timeout, read then: a process's output so far. */
  context?: () => string;
  /**
   * Asked after every read not accepted: an error it returns ends the wait at once (a process
   * the wait depends on has exited, so waiting longer cannot help).
   */
  giveUp?: () => Error | undefined;
}

type Truthy<T> = Exclude<T, false | null | undefined | 0 | ''>;

/**
 * Calls `read` every `intervalMs` until its value is accepted and resolves with that value;
 * throws once `timeoutMs` has passed, naming `what` and the last value (or error) seen.
 */
export async function until<T>(
  read: () => T | Promise<T>,
  options: UntilOptions<T> & { accept: (value: T) => boolean },
): Promise<T>;
export async function until<T>(read: () => T | Promise<T>, options: UntilOptions<T>): Promise<Truthy<T>>;
export async function until<T>(read: () => T | Promise<T>, options: UntilOptions<T>): Promise<T> {
  const { what, timeoutMs = 60_000, intervalMs = 200, accept = Boolean, errors = 'throw', context, giveUp } = options;
  const deadline = Date.now() + timeoutMs;
  let last: { value: T } | { error: unknown };
  for (;;) {
    try {
      const value = await read();
      if (accept(value)) return value;
      last = { value };
    } catch (error) {
      if (errors === 'throw') throw error;
      last = { error };
    }
    const hopeless = giveUp?.();
    if (hopeless) throw hopeless;
    if (Date.now() > deadline) {
      const seen = 'error' in last ? `error: ${String(last.error)}` : `value: ${shown(last.value)}`;
      const more = context ? `\n${context()}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last ${seen}${more}`, {
        cause: 'error' in last ? last.error : undefined,
      });
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

function shown(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    // a cycle or a bigint: String() says less, but says something
  }
  return (text ?? String(value)).slice(0, 2000);
}
