import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import { createServer } from 'node:net';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { countedApply } from '../../src/agent/metrics';
import type { ExecutionEvidence } from '../../src/domain';
import { ACTIONS_METRIC, APPLY_DURATION_METRIC, type ApplyRequest } from '../../src/contract';
import { installRuntime } from '../../src/worker/metrics';
import { action, cleanupNodes, expectRefusal, fileAction, makeNode } from '../agent/helpers';

/*
 * datum_actions_total and datum_apply_duration_seconds as the agent records them, in process:
 * this process's Temporal runtime serves Prometheus metrics as `datum agent`'s does (core's
 * exporter, installRuntime), the applies run in an activity context, and the test scrapes what
 * core exports: one count per apply answered, labelled like the ExecutionEvidence it returns and
 * like core's own activity series.
 */

afterEach(cleanupNodes);

/** A key line agent.yaml accepts (ssh-keygen -t ed25519's format); no apply here is signed by it. */
const TRUSTED = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVUx2oSNkbsYp3xBnuT0oHh6y1Bv8R3kzvE9nS2F0eF release@ci';

const silent = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

let metricsUrl: string;
beforeAll(async () => {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  metricsUrl = installRuntime({ metricsAddress: `127.0.0.1:${port}` }).metricsUrl!;
});

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of `name` for one task queue (each test runs its applies on its own). */
async function scraped(name: string, taskQueue: string): Promise<Sample[]> {
  const text = await (await fetch(metricsUrl)).text();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    );
    if (labels.task_queue === taskQueue) samples.push({ name, labels, value: Number(m[3]) });
  }
  return samples;
}

/** An activity context as the agent's worker gives one: its info is what the labels come from. */
const activityEnv = (taskQueue: string) =>
  new MockActivityEnvironment(
    { taskQueue, activityType: 'apply', namespace: 'default', workflowType: 'reconcileNode' },
    { logger: silent },
  );

describe('datum_actions_total on the agent', () => {
  it('counts applied, then replayed from the journal, refused by type, and a malformed kind as unknown', async () => {
    const t = await makeNode();
    const env = activityEnv('datum-node-A-1');
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

    const counted = await scraped(ACTIONS_METRIC, 'datum-node-A-1');
    const byLabels = (samples: Sample[], keys: string[]) =>
      samples.map((c) => ({ value: c.value, ...Object.fromEntries(keys.map((k) => [k, c.labels[k]])) }));
    expect(byLabels(counted, ['action', 'outcome', 'refusal'])).toEqual(
      expect.arrayContaining([
        { value: 1, action: 'file.write', outcome: 'applied', refusal: 'none' },
        { value: 1, action: 'file.write', outcome: 'replayed', refusal: 'none' },
        { value: 1, action: 'file.write', outcome: 'refused', refusal: 'ObserveModeRefusal' },
        { value: 1, action: 'unknown', outcome: 'refused', refusal: 'InvalidAction' },
      ]),
    );
    expect(counted).toHaveLength(4);
    // Each answer is also timed, by action kind, in seconds.
    const timed = await scraped(`${APPLY_DURATION_METRIC}_count`, 'datum-node-A-1');
    expect(byLabels(timed, ['action'])).toEqual(
      expect.arrayContaining([
        { value: 3, action: 'file.write' },
        { value: 1, action: 'unknown' },
      ]),
    );
    const seconds = await scraped(`${APPLY_DURATION_METRIC}_sum`, 'datum-node-A-1');
    expect(seconds.every((c) => c.value >= 0 && c.value < 60)).toBe(true);
    // Labelled from the activity's info as core labels its own activity series: snake_case, never camelCase.
    for (const c of [...counted, ...timed]) {
      expect(c.labels).toMatchObject({
        namespace: 'default',
        task_queue: 'datum-node-A-1',
        activity_type: 'apply',
        workflow_type: 'reconcileNode',
      });
      expect(Object.keys(c.labels).filter((l) => /[a-z][A-Z]/.test(l))).toEqual([]);
    }
  });

  it('counts and logs an apply a trust-requiring host refuses as UntrustedIntent', async () => {
    const t = await makeNode();
    const config = {
      node: t.node,
      root: t.root,
      reconciliation: { mode: 'enforce' },
      trust: { desired: [TRUSTED], require: true },
    };
    await fs.writeFile(t.configPath, stringify(config));
    const warned: Array<{ message: string; fields: Record<string, unknown> }> = [];
    const logger = {
      ...silent,
      warn: (message: string, fields?: Record<string, unknown>) => warned.push({ message, fields: fields ?? {} }),
    };
    const env = new MockActivityEnvironment(
      { taskQueue: 'datum-node-A-3', activityType: 'apply', namespace: 'default', workflowType: 'reconcileNode' },
      { logger },
    );
    const write = fileAction(t.node, 'config', 'etc/app/config.json', { workers: 99 }, { observed_marker: 'absent' });
    await expectRefusal(
      env.run((r: ApplyRequest) => t.acts.apply(r), { node: t.node, action: write }),
      'UntrustedIntent',
    );

    const counted = await scraped(ACTIONS_METRIC, 'datum-node-A-3');
    expect(counted.map((c) => ({ ...c.labels, value: c.value }))).toMatchObject([
      { action: 'file.write', outcome: 'refused', refusal: 'UntrustedIntent', value: 1 },
    ]);
    expect(warned).toContainEqual({
      message: 'apply refused',
      fields: expect.objectContaining({ node: t.node, resource_key: 'config', refusal: 'UntrustedIntent' }) as unknown,
    });
  });

  it('counts a failure that is not a refusal as failed, and passes the error through', async () => {
    const env = activityEnv('datum-node-A-2');
    const boom = new Error('disk on fire');
    const request = { node: 'N-1', action: { action: 'flag.write' } } as unknown as ApplyRequest;
    await expect(env.run(() => countedApply(request, () => Promise.reject(boom)))).rejects.toBe(boom);
    const counted = await scraped(ACTIONS_METRIC, 'datum-node-A-2');
    expect(counted.map((c) => c.labels)).toMatchObject([{ action: 'flag.write', outcome: 'failed', refusal: 'none' }]);
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
