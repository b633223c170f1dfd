import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decide, emptyHistory } from '../../src/domain';
import { startTimeSkippingEnv } from '../helpers/temporal';
import { authorityOf, n24, n24Before, snapshot } from '../unit/fixtures';
import { decideInSandbox } from '../helpers/domain-workflows';

describe('the pure core in the workflow sandbox', () => {
  let env: TestWorkflowEnvironment | undefined;
  beforeAll(async () => {
    env = await startTimeSkippingEnv();
  });
  afterAll(async () => {
    await env?.teardown();
  });

  it('bundles without Node built-ins and decides exactly as it does outside', async () => {
    const { client, nativeConnection } = env!;
    const taskQueue = `domain-${randomUUID()}`;
    const worker = await Worker.create({
      connection: nativeConnection,
      taskQueue,
      workflowsPath: path.join(__dirname, '../helpers/domain-workflows.ts'),
    });
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
});
