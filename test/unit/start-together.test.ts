import { describe, expect, it } from 'vitest';
import { startTogether } from '../helpers/processes';

/*
 * A test file's parts start side by side (a Temporal server, a fleet, the workflow bundle): when
 * one fails, the ones that started are stopped before the failure is reported, so a broken
 * bundle leaves no server running after the run.
 */

const part = (name: string, stopped: string[], how: 'teardown' | 'remove' | 'close' = 'teardown') => ({
  name,
  [how]: () => {
    stopped.push(name);
    return Promise.resolve();
  },
});

describe('startTogether', () => {
  it('gives every part, in order, when all start', async () => {
    const stopped: string[] = [];
    const [a, b] = await startTogether([Promise.resolve(part('server', stopped)), Promise.resolve(42)]);
    expect([a.name, b]).toEqual(['server', 42]);
    expect(stopped).toEqual([]);
  });

  it('stops each part that started, by whatever it has to stop it, and throws the failure', async () => {
    const stopped: string[] = [];
    const bundle = new Error('the workflow bundle did not build');
    await expect(
      startTogether([
        Promise.resolve(part('server', stopped)),
        Promise.resolve(part('fleet', stopped, 'remove')),
        Promise.reject(bundle),
        Promise.resolve(part('store', stopped, 'close')),
      ]),
    ).rejects.toBe(bundle);
    expect(stopped.sort()).toEqual(['fleet', 'server', 'store']);
  });

  it('a part that fails to stop does not hide the start failure', async () => {
    const failing = { teardown: () => Promise.reject(new Error('teardown failed')) };
    await expect(startTogether([Promise.resolve(failing), Promise.reject(new Error('fleet'))])).rejects.toThrow('fleet');
  });
});
