import { describe, expect, it } from 'vitest';
import { until } from '../helpers/until';

// The helper every integration test waits with: a wait that passes when it should have failed, or
// fails without saying what it saw, costs a rerun on a loaded CI box.

/** A read that returns the values given, one a call, then the last one again. */
function reads<T>(...values: T[]): () => T {
  let i = 0;
  return () => values[Math.min(i++, values.length - 1)];
}

describe('until', () => {
  it('resolves with the first truthy value read', async () => {
    await expect(until(reads<number | null | string>(0, null, 'ready'), { what: 'ready', intervalMs: 1 })).resolves.toBe('ready');
  });

  it('with accept, resolves with the first value it accepts, falsy or not', async () => {
    await expect(until(reads(3, 2, 0), { what: 'zero', accept: (n) => n === 0, intervalMs: 1 })).resolves.toBe(0);
  });

  it('on timeout, names what it waited for and the last value read', async () => {
    await expect(
      until(reads({ state: 'DRIFTED' }), {
        what: 'N-1 to converge',
        accept: (s) => s.state === 'CONVERGED',
        timeoutMs: 20,
        intervalMs: 5,
      }),
    ).rejects.toThrow(/timed out after 20 ms waiting for N-1 to converge; last value: \{"state":"DRIFTED"\}/);
  });

  it('adds what context says to the timeout', async () => {
    await expect(
      until(() => false, { what: 'exit', timeoutMs: 10, intervalMs: 5, context: () => 'output so far: none' }),
    ).rejects.toThrow(/last value: false\noutput so far: none$/);
  });

  it('fails at once on an error read, unless told to retry it', async () => {
    let calls = 0;
    const failing = () => {
      calls++;
      throw new Error('not there yet');
    };
    await expect(until(failing, { what: 'x', timeoutMs: 1000, intervalMs: 1 })).rejects.toThrow('not there yet');
    expect(calls).toBe(1);

    let tries = 0;
    const late = () => {
      if (++tries < 3) throw new Error('not there yet');
      return 'there';
    };
    await expect(until(late, { what: 'x', errors: 'retry', intervalMs: 1 })).resolves.toBe('there');
    await expect(until(failing, { what: 'x', errors: 'retry', timeoutMs: 10, intervalMs: 5 })).rejects.toThrow(
      /waiting for x; last error: Error: not there yet/,
    );
  });

  it('stops at once when giveUp returns an error', async () => {
    let calls = 0;
    const gone = new Error('the agent exited (1)');
    await expect(
      until(() => ++calls > 100, { what: 'x', timeoutMs: 10_000, intervalMs: 1, giveUp: () => (calls >= 2 ? gone : undefined) }),
    ).rejects.toBe(gone);
    expect(calls).toBe(2);
  });
});
