import { describe, expect, it } from 'vitest';
import { CONTROL_TASK_QUEUE, loopShardOf, loopTaskQueue } from '../../src/contract';

/*
 * The rule that puts a node's loops on a controller queue must give the same queue in every
 * process and release, or a rollout started by one controller puts a loop where the workers given
 * that node's shard do not poll. The expected numbers are FNV-1a 32 computed outside this code
 * (Python: h = 0x811c9dc5; h = ((h ^ b) * 0x01000193) & 0xffffffff per UTF-8 byte).
 */
describe('loop shards', () => {
  it('puts a node on the same queue every time, by FNV-1a of its name', () => {
    expect(loopShardOf('N-21', 2 ** 32)).toBe(2933751801);
    expect(loopShardOf('node-0001', 2 ** 32)).toBe(490398131);
    expect(['N-21', 'N-22', 'N-23', 'N-24', 'N-25', 'N-26'].map((n) => loopTaskQueue(n, 4))).toEqual([
      'datum-control-loops-1',
      'datum-control-loops-0',
      'datum-control-loops-3',
      'datum-control-loops-2',
      'datum-control-loops-1',
      'datum-control-loops-0',
    ]);
    expect(loopTaskQueue('N-23', 3)).toBe('datum-control-loops-2');
  });

  it('keeps every loop on datum-control with one shard, as before shards existed', () => {
    for (const node of ['N-21', 'web-7', 'db.eu-1']) expect(loopTaskQueue(node, 1)).toBe(CONTROL_TASK_QUEUE);
  });

  it("keeps a separate controller's loops on queues of its own name, never on the fleet's", () => {
    expect(loopTaskQueue('N-23', 3, 'datum-staging')).toBe('datum-staging-loops-2');
    expect(loopTaskQueue('N-23', 1, 'datum-staging')).toBe('datum-staging');
  });

  it('spreads a fleet near evenly, so a shard worker caches about its share', () => {
    const counts = new Array<number>(4).fill(0);
    for (let i = 0; i < 1000; i++) counts[loopShardOf(`node-${String(i).padStart(4, '0')}`, 4)]++;
    // The controller gives each shard 1.25 times its share of the cache (createControllerWorkers).
    for (const c of counts) expect(c).toBeGreaterThan(250 / 1.25);
    for (const c of counts) expect(c).toBeLessThan(250 * 1.25);
  });
});
