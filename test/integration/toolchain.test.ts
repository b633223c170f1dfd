// Toolchain smoke test: the pinned binaries start, a real worker bundles and runs a real
// workflow, Datum's search attributes are registered and queryable, and the time-skipping
// server skips time. If this fails, no other integration test can be trusted.

import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevEnv, startTimeSkippingEnv } from '../helpers/temporal';
import * as activities from '../helpers/smoke-activities';
import { sleepTwoDaysWorkflow, smokeWorkflow } from '../helpers/smoke-workflows';

const TWO_DAYS_MS = 2 * 24 * 60 * 60 * 1000;

let workflowBundle: WorkflowBundleWithSourceMap;

beforeAll(async () => {
  // One bundle for both environments: bundling is the slow part of creating a worker.
  workflowBundle = await bundleWorkflowCode({
    workflowsPath: path.join(__dirname, '../helpers/smoke-workflows.ts'),
    logger: quietBundlerLogger,
  });
});

describe('dev server', () => {
  let env: TestWorkflowEnvironment | undefined;

  beforeAll(async () => {
    env = await startDevEnv();
  });

  afterAll(async () => {
    await env?.teardown();
  });

  it('runs a workflow that calls an activity and is found by its DatumStatus search attribute', async () => {
    const { client, nativeConnection } = env!;
    const taskQueue = `smoke-${randomUUID()}`;
    const workflowId = `smoke/${randomUUID()}`;
    const worker = await Worker.create({ connection: nativeConnection, taskQueue, workflowBundle, activities });

    const result = await worker.runUntil(client.workflow.execute(smokeWorkflow, { taskQueue, workflowId, args: ['datum'] }));
    expect(result).toBe('hello, datum');

    // Visibility is eventually consistent: poll rather than assert once.
    const found = await pollUntil(10_000, async () => {
      const ids: string[] = [];
      for await (const execution of client.workflow.list({ query: 'DatumStatus="SMOKE"' })) {
        ids.push(execution.workflowId);
      }
      return ids.includes(workflowId) ? ids : undefined;
    });
    expect(found).toContain(workflowId);

    const description = await client.workflow.getHandle(workflowId).describe();
    expect(description.searchAttributes.DatumStatus).toEqual(['SMOKE']);
  });
});

describe('time-skipping server', () => {
  let env: TestWorkflowEnvironment | undefined;

  beforeAll(async () => {
    env = await startTimeSkippingEnv();
  });

  afterAll(async () => {
    await env?.teardown();
  });

  it("skips a workflow's two-day sleep in far less than real time", async () => {
    const { client, nativeConnection } = env!;
    const taskQueue = `smoke-ts-${randomUUID()}`;
    const worker = await Worker.create({ connection: nativeConnection, taskQueue, workflowBundle, activities });

    const wallStart = performance.now();
    const result = await worker.runUntil(
      client.workflow.execute(sleepTwoDaysWorkflow, { taskQueue, workflowId: `smoke-sleep/${randomUUID()}` }),
    );
    const wallElapsedMs = performance.now() - wallStart;

    expect(result.elapsedMs).toBeGreaterThanOrEqual(TWO_DAYS_MS);
    expect(wallElapsedMs).toBeLessThan(60_000);
  });

  it('accepts upserts of Datum search attributes (registered by startTimeSkippingEnv)', async () => {
    // The test server has no visibility list API; describe() shows the upserted value.
    const { client, nativeConnection } = env!;
    const taskQueue = `smoke-ts-${randomUUID()}`;
    const workflowId = `smoke/${randomUUID()}`;
    const worker = await Worker.create({ connection: nativeConnection, taskQueue, workflowBundle, activities });

    const result = await worker.runUntil(
      client.workflow.execute(smokeWorkflow, { taskQueue, workflowId, args: ['time'], workflowExecutionTimeout: '1 minute' }),
    );
    expect(result).toBe('hello, time');
    const description = await client.workflow.getHandle(workflowId).describe();
    expect(description.searchAttributes.DatumStatus).toEqual(['SMOKE']);
  });
});

/** Retries `probe` until it returns a value or `timeoutMs` passes; returns the last value. */
async function pollUntil<T>(timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined || Date.now() >= deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string, meta?: Record<string, unknown>) => console.warn(message, meta ?? ''),
  error: (message: string, meta?: Record<string, unknown>) => console.error(message, meta ?? ''),
};
