import type { MetricCounter, MetricGauge, MetricHistogram, MetricMeter, MetricTags } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { countedApply } from '../../src/agent/metrics';
import type { ExecutionEvidence } from '../../src/domain';
import { ACTIONS_METRIC, APPLY_DURATION_METRIC, type ApplyRequest } from '../../src/contract';
import { action, cleanupNodes, expectRefusal, fileAction, makeNode } from '../agent/helpers';

/*
 * datum_actions_total as the agent counts it, in process with a meter that remembers what it
 * was given: one count per apply answered, labelled like the ExecutionEvidence it returns.
 */

afterEach(cleanupNodes);

const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

type Counted = { name: string; value: number; tags: MetricTags };

/** The activity's meter in a real worker is core's; this one keeps the calls for assertions. */
function recordingMeter(): { meter: MetricMeter; counted: Counted[]; timed: Counted[] } {
  const counted: Counted[] = [];
  const timed: Counted[] = [];
  const unsupported = (): never => {
    throw new Error('not used by the agent');
  };
  const meter: MetricMeter = {
    createCounter: (name: string): MetricCounter => ({
      name,
      kind: 'counter',
      valueType: 'int',
      add: (value: number, tags: MetricTags = {}) => void counted.push({ name, value, tags }),
      withTags: unsupported,
    }),
    createHistogram: (name: string): MetricHistogram => ({
      name,
      kind: 'histogram',
      valueType: 'float',
      record: (value: number, tags: MetricTags = {}) => void timed.push({ name, value, tags }),
      withTags: unsupported,
    }),
    createGauge: (): MetricGauge => unsupported(),
    withTags: unsupported,
  };
  return { meter, counted, timed };
}

describe('datum_actions_total on the agent', () => {
  it('counts applied, then replayed from the journal, refused by type, and a malformed kind as unknown', async () => {
    const t = await makeNode();
    const { meter, counted, timed } = recordingMeter();
    const env = new MockActivityEnvironment(undefined, { metricMeter: meter, logger: silent });
    const apply = (request: ApplyRequest): Promise<ExecutionEvidence> => env.run((r: ApplyRequest) => t.acts.apply(r), request);

    // Planned from a snapshot where the file is absent (the agent compares that marker before writing).
    const write = fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 }, { observed_marker: 'absent' });
    expect((await apply({ node: t.node, action: write })).outcome).toBe('applied');
    expect((await apply({ node: t.node, action: write })).outcome).toBe('replayed');
    await t.writeConfig({ mode: 'observe' });
    await expectRefusal(
      apply({ node: t.node, action: fileAction(t.node, 'config', 'etc/app/config.json', { workers: 9 }) }),
      'ObserveModeRefusal',
    );
    await t.writeConfig({ mode: 'enforce' });
    await expectRefusal(apply({ node: t.node, action: action(t.node, 'x', 'rm -rf /', {}) }), 'InvalidAction');

    expect(counted.map((c) => c.name)).toEqual(Array(4).fill(ACTIONS_METRIC));
    // Each answer is also timed, by action kind, in seconds.
    expect(timed.map((c) => [c.name, c.tags.action])).toEqual([
      [APPLY_DURATION_METRIC, 'file.write'],
      [APPLY_DURATION_METRIC, 'file.write'],
      [APPLY_DURATION_METRIC, 'file.write'],
      [APPLY_DURATION_METRIC, 'unknown'],
    ]);
    expect(timed.every((c) => c.value >= 0 && c.value < 60)).toBe(true);
    expect(
      counted.map((c) => ({ value: c.value, action: c.tags.action, outcome: c.tags.outcome, refusal: c.tags.refusal })),
    ).toEqual([
      { value: 1, action: 'file.write', outcome: 'applied', refusal: 'none' },
      { value: 1, action: 'file.write', outcome: 'replayed', refusal: 'none' },
      { value: 1, action: 'file.write', outcome: 'refused', refusal: 'ObserveModeRefusal' },
      { value: 1, action: 'unknown', outcome: 'refused', refusal: 'InvalidAction' },
    ]);
    // The activity's own tags come along, as they do on a real worker.
    expect(counted[0].tags).toMatchObject({
      activityType: expect.any(String) as string,
      taskQueue: expect.any(String) as string,
    });
  });

  it('counts a failure that is not a refusal as failed, and passes the error through', async () => {
    const { meter, counted } = recordingMeter();
    const env = new MockActivityEnvironment(undefined, { metricMeter: meter, logger: silent });
    const boom = new Error('disk on fire');
    const request = { node: 'N-1', action: { action: 'flag.write' } } as unknown as ApplyRequest;
    await expect(env.run(() => countedApply(request, () => Promise.reject(boom)))).rejects.toBe(boom);
    expect(counted.map((c) => c.tags)).toMatchObject([{ action: 'flag.write', outcome: 'failed', refusal: 'none' }]);
  });

  it('outside an activity (a direct call, no meter) answers as if uncounted instead of failing', async () => {
    const t = await makeNode();
    const evidence = await countedApply(
      { node: t.node, action: fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 }) },
      () =>
        Promise.resolve({
          resource_key: 'config',
          action: 'file.write',
          idempotency_key: 'k',
          outcome: 'applied',
          executed_at: '2026-01-01T00:00:00.000Z',
          marker_after: null,
          detail: 'ok',
          refusal: null,
        }),
    );
    expect(evidence.outcome).toBe('applied');
  });
});
