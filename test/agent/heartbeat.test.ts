import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BEAT_MS, WATCH_BEAT_MS, loopHeartbeat, whileBeating } from '../../src/agent/heartbeat';

// The one way the agent's activities beat (src/agent/heartbeat.ts). Every beat the SDK sends is
// a write on the server, so a task that finishes within one interval must not beat at all.
describe('agent heartbeats', () => {
  afterEach(() => vi.useRealTimers());

  it('whileBeating beats first after BEAT_MS, then every BEAT_MS until the work ends', async () => {
    vi.useFakeTimers();
    const env = new MockActivityEnvironment();
    let beats = 0;
    env.on('heartbeat', () => beats++);
    let finish!: (v: string) => void;
    const running = env.run(() => whileBeating(() => new Promise<string>((resolve) => (finish = resolve))));
    await vi.advanceTimersByTimeAsync(BEAT_MS - 1);
    expect(beats).toBe(0);
    await vi.advanceTimersByTimeAsync(1 + 2 * BEAT_MS);
    expect(beats).toBe(3);
    finish('done');
    await expect(running).resolves.toBe('done');
    await vi.advanceTimersByTimeAsync(2 * BEAT_MS);
    expect(beats).toBe(3);
  });

  it('a task that finishes within BEAT_MS never beats', async () => {
    vi.useFakeTimers();
    const env = new MockActivityEnvironment();
    let beats = 0;
    env.on('heartbeat', () => beats++);
    await env.run(() => whileBeating(() => Promise.resolve('quick')));
    await vi.advanceTimersByTimeAsync(3 * BEAT_MS);
    expect(beats).toBe(0);
  });

  it('loopHeartbeat beats first WATCH_BEAT_MS after the loop starts, then at most every WATCH_BEAT_MS', async () => {
    vi.useFakeTimers();
    const env = new MockActivityEnvironment();
    let beats = 0;
    env.on('heartbeat', () => beats++);
    await env.run(async () => {
      const beat = loopHeartbeat();
      beat();
      vi.advanceTimersByTime(WATCH_BEAT_MS - 1);
      beat();
      expect(beats).toBe(0);
      vi.advanceTimersByTime(1);
      beat();
      beat();
      expect(beats).toBe(1);
      vi.advanceTimersByTime(WATCH_BEAT_MS - 1);
      beat();
      expect(beats).toBe(1);
      vi.advanceTimersByTime(1);
      beat();
      expect(beats).toBe(2);
      return Promise.resolve();
    });
  });

  it('outside an activity nothing beats and the work still runs', async () => {
    expect(() => loopHeartbeat()()).not.toThrow();
    await expect(whileBeating(() => Promise.resolve(7))).resolves.toBe(7);
  });
});
