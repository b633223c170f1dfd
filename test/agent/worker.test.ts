// The agent worker: fails fast on an invalid agent.yaml, and on a real dev server serves several
// virtual nodes from one process, each on its own task queue with its own root.

import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runAgents } from '../../src/agent/worker';
import { InvalidAgentConfig } from '../../src/domain';
import { startDevEnv } from '../helpers/temporal';
import { callAgent } from './agent-workflows';
import { action, cleanupNodes, makeNode } from './helpers';

afterEach(cleanupNodes);

describe('runAgents start-up', () => {
  it('fails fast with the InvalidAgentConfig message when an agent.yaml is invalid', async () => {
    const t = await makeNode();
    await fs.writeFile(t.configPath, `node: ${t.node}\nroot: ${t.root}\nreconciliation: { mode: yolo }\n`);
    const start = runAgents({ configPaths: [t.configPath], address: '127.0.0.1:1' });
    await expect(start).rejects.toBeInstanceOf(InvalidAgentConfig);
    await expect(start).rejects.toThrow(/reconciliation\.mode: mode must be observe or enforce — fix:/);
  });

  it('refuses two agent.yaml files for the same node', async () => {
    const a = await makeNode();
    const b = await makeNode();
    await expect(runAgents({ configPaths: [a.configPath, b.configPath], address: '127.0.0.1:1' })).rejects.toThrow(
      /both declare node N-24/,
    );
  });
});

describe('runAgents on a dev server', () => {
  let env: TestWorkflowEnvironment | undefined;

  beforeAll(async () => {
    env = await startDevEnv();
  });

  afterAll(async () => {
    await env?.teardown();
  });

  it('serves two virtual nodes from one process, each on datum-node-<node> with its own root', async () => {
    const n1 = await makeNode({ node: 'N-1' });
    const n2 = await makeNode({ node: 'N-2', mode: 'observe' });
    const taskQueue = `agent-test-${randomUUID()}`;
    const workflowBundle = await bundleWorkflowCode({ workflowsPath: path.join(__dirname, 'agent-workflows.ts'), logger: quiet });
    const worker = await Worker.create({ connection: env!.nativeConnection, taskQueue, workflowBundle });
    const flag = { maintenance: { type: 'flag' as const, value: true } };

    const agents = await runAgents({
      configPaths: [n1.configPath, n2.configPath],
      connection: env!.nativeConnection,
      namespace: 'default',
    });
    try {
      expect(agents.nodes).toEqual(['N-1', 'N-2']);
      await worker.runUntil(async () => {
        const one = await env!.client.workflow.execute(callAgent, {
          taskQueue,
          workflowId: `agent-test/${randomUUID()}`,
          // Planned from a snapshot where the flag is absent: the agent compares that marker before writing.
          args: [
            'N-1',
            flag,
            action('N-1', 'maintenance', 'flag.write', { name: 'maintenance', value: true }, { observed_marker: 'absent' }),
          ],
        });
        expect(one.before.resources.maintenance).toMatchObject({ value: null, marker: 'absent' });
        expect(one.evidence).toMatchObject({ outcome: 'applied', resource_key: 'maintenance' });
        expect(one.after.resources.maintenance).toMatchObject({ value: true, marker: one.evidence!.marker_after });

        // N-2 is in observe mode: the refusal crosses the wire as a non-retryable failure.
        const two = env!.client.workflow.execute(callAgent, {
          taskQueue,
          workflowId: `agent-test/${randomUUID()}`,
          args: ['N-2', flag, action('N-2', 'maintenance', 'flag.write', { name: 'maintenance', value: true })],
        });
        await expect(two).rejects.toMatchObject({ cause: { cause: { type: 'ObserveModeRefusal', nonRetryable: true } } });
      });
      // Each node's queue, by its documented name, is polled (the one process serves both).
      for (const node of ['N-1', 'N-2']) {
        const { pollers } = await env!.client.workflowService.describeTaskQueue({
          namespace: 'default',
          taskQueue: { name: `datum-node-${node}` },
          taskQueueType: TASK_QUEUE_TYPE_ACTIVITY,
        });
        expect(pollers?.length ?? 0, `an agent polls datum-node-${node}`).toBeGreaterThan(0);
      }
    } finally {
      await agents.shutdown();
    }
    await expect(agents.done).resolves.toBeUndefined();
    expect(await fs.readFile(path.join(n1.root, 'flags/maintenance.json'), 'utf8')).toBe('true\n');
    await expect(fs.stat(path.join(n2.root, 'flags'))).rejects.toThrow(/ENOENT/);
  });
});

/** temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY */
const TASK_QUEUE_TYPE_ACTIVITY = 2;

const quiet = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
