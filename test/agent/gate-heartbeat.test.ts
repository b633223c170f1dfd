import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Observation, ObserveRequest } from '../../src/contract';
import { createAgentActivities } from '../../src/agent/activities';
import { agentGate } from '../../src/agent/gate';
import { BEAT_MS } from '../../src/agent/heartbeat';
import { cleanupNodes, makeNode, type TestNode } from './helpers';

// Issue 33: an observe or apply waiting at the agent's gate beat every BEAT_MS from the moment its
// task started, and every beat is a write on the server. At 1000 nodes most tasks wait there. A
// waiting task now beats only when its silence would come near its heartbeat timeout, and its
// cancellation still takes it out of the queue at once.

const HEARTBEAT_TIMEOUT_MS = 30_000;
const quiet = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** Holds the node's whole share of the gate (two slots) until the returned function is called. */
function fillShare(t: TestNode): () => Promise<void> {
  let open!: () => void;
  const held = new Promise<void>((resolve) => (open = resolve));
  const runs = [0, 1].map(() => agentGate.run('observe', () => held, { node: t.configPath }));
  return async () => {
    open();
    await Promise.all(runs);
  };
}

function observing(t: TestNode) {
  const env = new MockActivityEnvironment({ heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS }, { logger: quiet });
  const beats: number[] = [];
  env.on('heartbeat', () => beats.push(Date.now()));
  const started = Date.now();
  const request: ObserveRequest = { node: t.node, generation: 1, resources: {} };
  const result: Promise<Observation> = env.run(createAgentActivities(t.configPath).observe, request);
  result.catch(() => undefined);
  return { env, beats: () => beats.map((at) => at - started), result };
}

describe('a task waiting at the agent gate (issue 33)', () => {
  afterEach(async () => {
    vi.useRealTimers();
    await cleanupNodes();
  });

  it('does not beat while it waits, except once before its heartbeat timeout; once admitted it runs and answers', async () => {
    const t = await makeNode();
    await t.writeConfig();
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
    const release = fillShare(t);
    const o = observing(t);
    await vi.advanceTimersByTimeAsync(HEARTBEAT_TIMEOUT_MS - 2 * BEAT_MS - 1);
    expect(agentGate.load.waiting).toBe(1);
    // Waiting 19.999 s: no beat (every BEAT_MS before, three of them).
    expect(o.beats()).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    // The one that keeps a long wait from being taken for a lost task, 10 s before the timeout.
    expect(o.beats()).toEqual([HEARTBEAT_TIMEOUT_MS - 2 * BEAT_MS]);
    await release();
    expect((await o.result).config_error).toBeNull();
    expect(agentGate.load).toEqual({ running: 0, waiting: 0 });
  });

  it('is cancelled while it waits: it leaves the queue at once, without having beaten', async () => {
    const t = await makeNode();
    await t.writeConfig();
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
    const release = fillShare(t);
    const o = observing(t);
    await vi.advanceTimersByTimeAsync(3 * BEAT_MS);
    expect(agentGate.load.waiting).toBe(1);
    o.env.cancel('CANCELLED');
    await expect(o.result).rejects.toThrow();
    expect(agentGate.load.waiting).toBe(0);
    expect(o.beats()).toEqual([]);
    await release();
    expect(agentGate.load).toEqual({ running: 0, waiting: 0 });
  });
});
