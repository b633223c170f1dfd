import { describe, expect, it } from 'vitest';
import { Gate } from '../../src/agent/gate';

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
});
