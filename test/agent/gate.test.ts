import { describe, expect, it } from 'vitest';
import { AttemptEnded, Gate } from '../../src/agent/gate';

/*
 * The agent's gate (src/agent/gate.ts): an agent serving many nodes runs a few observes and
 * applies at a time, and an apply waiting goes first, so the snapshot it was planned from does
 * not age past observation_ttl in the agent's own queue.
 */

/** Work that runs until the test lets it finish, recording when it started. */
function held(log: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return {
    work: async () => {
      log.push(name);
      await done;
      return name;
    },
    finish,
  };
}

const settle = () => new Promise((r) => setImmediate(r));

describe('the agent gate', () => {
  it('runs at most its slots at once, and the rest as slots free up', async () => {
    const gate = new Gate(2);
    const log: string[] = [];
    const jobs = ['o1', 'o2', 'o3', 'o4'].map((n) => held(log, n));
    const results = jobs.map((j) => gate.run('observe', j.work));
    await settle();
    expect(log).toEqual(['o1', 'o2']);
    expect(gate.load).toEqual({ running: 2, waiting: 2 });
    jobs[0].finish();
    await settle();
    expect(log).toEqual(['o1', 'o2', 'o3']);
    for (const j of jobs) j.finish();
    expect(await Promise.all(results)).toEqual(['o1', 'o2', 'o3', 'o4']);
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  it('lets a waiting apply in before observes that were waiting longer', async () => {
    const gate = new Gate(1);
    const log: string[] = [];
    const first = held(log, 'observe-1');
    const observe2 = held(log, 'observe-2');
    const apply = held(log, 'apply');
    const runs = [gate.run('observe', first.work), gate.run('observe', observe2.work), gate.run('apply', apply.work)];
    await settle();
    first.finish();
    await settle();
    expect(log).toEqual(['observe-1', 'apply']);
    apply.finish();
    observe2.finish();
    await Promise.all(runs);
    expect(log).toEqual(['observe-1', 'apply', 'observe-2']);
  });

  it('frees the slot of work that fails, and the failure reaches its caller', async () => {
    const gate = new Gate(1);
    const failing = gate.run('apply', () => Promise.reject(new Error('EACCES')));
    const next = gate.run('observe', () => Promise.resolve('observed'));
    await expect(failing).rejects.toThrow('EACCES');
    expect(await next).toBe('observed');
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  it("gives each node its share: one node's stuck work never takes the slots the others need", async () => {
    const gate = new Gate(8); // two slots a node
    const log: string[] = [];
    const stuck = ['s1', 's2', 's3', 's4', 's5'].map((n) => held(log, n));
    const stuckRuns = stuck.map((j) => gate.run('observe', j.work, { node: 'A' }));
    const others = ['b1', 'c1', 'd1'].map((n) => held(log, n));
    const otherRuns = others.map((j, i) => gate.run('observe', j.work, { node: ['B', 'C', 'D'][i] }));
    await settle();
    expect(log).toEqual(['s1', 's2', 'b1', 'c1', 'd1']);
    expect(gate.load).toEqual({ running: 5, waiting: 3 });
    for (const j of others) j.finish();
    expect(await Promise.all(otherRuns)).toEqual(['b1', 'c1', 'd1']);
    for (const j of stuck) j.finish();
    await Promise.all(stuckRuns);
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  it('frees the slot when its attempt ends, not when its abandoned work does; an attempt ended while waiting leaves the queue', async () => {
    const gate = new Gate(1);
    const log: string[] = [];
    const hung = held(log, 'hung');
    const attempt = new AbortController();
    const running = gate.run('observe', hung.work, { node: 'A', signal: attempt.signal });
    const waitingAttempt = new AbortController();
    const waiting = gate.run('observe', held(log, 'never').work, { node: 'B', signal: waitingAttempt.signal });
    const next = held(log, 'next');
    const nextRun = gate.run('observe', next.work, { node: 'C' });
    await settle();
    expect(log).toEqual(['hung']);
    waitingAttempt.abort();
    await expect(waiting).rejects.toThrow(AttemptEnded);
    attempt.abort(new Error('activity cancelled: heartbeat timeout'));
    await expect(running).rejects.toThrow('heartbeat timeout');
    await settle();
    // The abandoned work has not finished, yet the next attempt runs.
    expect(log).toEqual(['hung', 'next']);
    next.finish();
    expect(await nextRun).toBe('next');
    hung.finish();
    await settle();
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });
});
