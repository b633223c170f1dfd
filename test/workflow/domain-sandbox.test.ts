import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decide, emptyHistory, type ConvergenceStatus, type DecideInput } from '../../src/domain';
import { startTimeSkippingEnv } from '../helpers/temporal';
import { authorityOf, n24, n24Before, snapshot } from '../unit/fixtures';
import { decideAllInSandbox, decideInSandbox } from '../helpers/domain-workflows';
import { coverage } from '../unit/generators';
import { AGE_EDGES, edgeOf, historyArb, intent, snapshotArb, type AgeEdge } from '../unit/snapshots';
import { NOW } from '../unit/fixtures';

/** Generated cases, judged in batches of BATCH per workflow run (one run per case would take minutes). */
const CASES = 1_000;
const BATCH = 25;

describe('the pure core in the workflow sandbox', () => {
  let env: TestWorkflowEnvironment | undefined;
  beforeAll(async () => {
    env = await startTimeSkippingEnv();
  });
  afterAll(async () => {
    await env?.teardown();
  });
  /** A worker whose workflows (../helpers/domain-workflows.ts) run the domain in the sandbox. */
  const sandboxWorker = async () => {
    const { client, nativeConnection } = env!;
    const taskQueue = `domain-${randomUUID()}`;
    const workflowsPath = path.join(__dirname, '../helpers/domain-workflows.ts');
    return { client, taskQueue, worker: await Worker.create({ connection: nativeConnection, taskQueue, workflowsPath }) };
  };

  it('bundles without Node built-ins and decides exactly as it does outside', async () => {
    const { client, taskQueue, worker } = await sandboxWorker();
    const input = {
      intent: n24(),
      authority: authorityOf(n24()),
      observation: snapshot(n24Before()),
      history: emptyHistory(),
      now: '2026-11-29T12:00:00.000Z',
    };
    const inSandbox = await worker.runUntil(
      client.workflow.execute(decideInSandbox, { taskQueue, workflowId: `domain/${randomUUID()}`, args: [input] }),
    );
    expect(inSandbox).toEqual(JSON.parse(JSON.stringify(decide(input))));
    expect(inSandbox.decision.authorized_actions.map((a) => a.action)).toEqual(['release.install', 'service.restart']);
  });

  it(`decides exactly as it does outside over ${CASES} generated snapshots, on both sides of every edge of freshness`, async () => {
    const { client, taskQueue, worker } = await sandboxWorker();
    // Each edge the gate decides on, and each way a decision ends, reached by some case.
    const cov = coverage({
      ...(Object.fromEntries(Object.keys(AGE_EDGES).map((edge) => [edge, 0.002])) as Record<AgeEdge, number>),
      CONVERGED: 0.02,
      DRIFTED: 0.02,
      BLOCKED: 0.05,
      'acts on the node': 0.05,
    } satisfies Partial<Record<AgeEdge | ConvergenceStatus | 'acts on the node', number>>);
    const input = fc
      .record({ observation: snapshotArb, history: historyArb })
      .map((g): DecideInput => ({ intent, authority: authorityOf(intent), ...g, now: NOW }));
    await worker.runUntil(
      fc.assert(
        fc.asyncProperty(fc.array(input, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
          const inSandbox = await client.workflow.execute(decideAllInSandbox, {
            taskQueue,
            workflowId: `domain/${randomUUID()}`,
            args: [batch],
          });
          batch.forEach((one, i) => {
            const outside = decide(one);
            expect(inSandbox[i], `case ${i} of the batch: ${JSON.stringify(one.observation)}`).toEqual(
              JSON.parse(JSON.stringify(outside)),
            );
            const edge = edgeOf(one.observation!);
            if (edge) cov.hit(edge);
            const status = outside.decision.convergence_status;
            if (status in cov.counts) cov.hit(status as keyof typeof cov.counts);
            if (outside.decision.authorized_actions.length > 0) cov.hit('acts on the node');
          });
        }),
        { numRuns: CASES / BATCH },
      ),
    );
    expect(cov.missed(CASES)).toEqual([]);
  }, 300_000);
});
