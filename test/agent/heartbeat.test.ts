import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BEAT_MS, loopHeartbeat, whileBeating } from '../../src/agent/heartbeat';

// The one way the agent's activities beat (src/agent/heartbeat.ts).
describe('agent heartbeats', () => {
  afterEach(() => vi.useRealTimers());

  it('whileBeating beats at once and every BEAT_MS until the work ends', async () => {
    vi.useFakeTimers();
    const env = new MockActivityEnvironment();
    let beats = 0;
    env.on('heartbeat', () => beats++);
    let finish!: (v: string) => void;
    const running = env.run(() => whileBeating(() => new Promise<string>((resolve) => (finish = resolve))));
    await vi.advanceTimersByTimeAsync(0);
    expect(beats).toBe(1);
    await vi.advanceTimersByTimeAsync(2 * BEAT_MS);
    expect(beats).toBe(3);
    finish('done');
    await expect(running).resolves.toBe('done');
    await vi.advanceTimersByTimeAsync(2 * BEAT_MS);
    expect(beats).toBe(3);
  });

  it('loopHeartbeat beats on the first turn, then at most every BEAT_MS', async () => {
    vi.useFakeTimers();
    const env = new MockActivityEnvironment();
    let beats = 0;
    env.on('heartbeat', () => beats++);
    await env.run(async () => {
      const beat = loopHeartbeat();
      beat();
      beat();
      expect(beats).toBe(1);
      vi.advanceTimersByTime(BEAT_MS - 1);
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
