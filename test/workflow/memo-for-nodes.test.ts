import { randomUUID } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowBundleOptions } from '../../src/worker/bundle';
import {
  MEMO_LAST_VERIFIED,
  MEMO_REASON,
  MEMO_SINCE,
  MEMO_VERIFIED_EVERY_MS,
  WORKFLOW_TYPES,
  agentTaskQueue,
  ledgerQuery,
  stateQuery,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { fakeAuthority, fakeNode } from '../helpers/fake-node';
import { quietLogger } from '../helpers/stack';
import { startTimeSkippingEnv } from '../helpers/temporal';
import { workflowMetricSinks } from '../../src/worker/workflow-metrics';

/*
 * What `datum nodes` reads from visibility: the memo's reason, since and last_verified_at. On the
 * time-skipping server, a node that stays right for half an hour records no ledger entry, yet its
 * memo's last_verified_at keeps up to MEMO_VERIFIED_EVERY_MS behind the loop's own, written once
 * per interval, not once per pass.
 */

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundleWithSourceMap;

beforeAll(async () => {
  [env, bundle] = await Promise.all([
    startTimeSkippingEnv(),
    bundleWorkflowCode({ ...workflowBundleOptions(), logger: quietLogger }),
  ]);
});
afterAll(async () => {
  await env?.teardown();
});

const memoWrites = async (workflowId: string) => {
  const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
  return (history.events ?? []).filter((e) => e.workflowPropertiesModifiedEventAttributes).length;
};

describe('the memo datum nodes reads', () => {
  it('carries reason and since, and moves last_verified_at in steady state at most once per interval', async () => {
    const taskQueue = `control-${randomUUID()}`;
    const node = fakeNode();
    const controller = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: bundle,
      sinks: workflowMetricSinks(),
      activities: fakeAuthority().activities,
    });
    const agent = await Worker.create({
      connection: env.nativeConnection,
      taskQueue: agentTaskQueue('N-24'),
      activities: node.activities,
    });
    const runs = [controller.run(), agent.run()];
    try {
      const workflowId = `datum/N-24/gen-12-${randomUUID()}`;
      const handle = await env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
        taskQueue,
        workflowId,
        args: [{ node: 'N-24', generation: 12 }],
      });
      await env.sleep('1 minute');
      const first = (await handle.describe()).memo ?? {};
      const ledger = await handle.query(ledgerQuery);
      const entries = ledger.length;
      // The last recorded decision's reason, as DatumStatus is its status.
      expect(first[MEMO_REASON]).toBe(ledger[ledger.length - 1].reason);
      expect(typeof first[MEMO_SINCE]).toBe('string');
      const writesBefore = await memoWrites(workflowId);

      // Half an hour of steady passes (resync 30s: about 60 of them, within one run's history).
      await env.sleep('30 minutes');
      const state = await handle.query(stateQuery);
      const later = (await handle.describe()).memo ?? {};
      expect((await handle.query(ledgerQuery)).length).toBe(entries);
      const lag = Date.parse(state.last_verified_at!) - Date.parse(later[MEMO_LAST_VERIFIED] as string);
      expect(lag).toBeGreaterThanOrEqual(0);
      expect(lag).toBeLessThan(MEMO_VERIFIED_EVERY_MS + 60_000);
      expect(Date.parse(later[MEMO_LAST_VERIFIED] as string) - Date.parse(first[MEMO_LAST_VERIFIED] as string)).toBeGreaterThan(
        20 * 60_000,
      );
      expect(later[MEMO_SINCE]).toBe(first[MEMO_SINCE]);
      // About one write per interval, not one per pass.
      const writes = (await memoWrites(workflowId)) - writesBefore;
      expect(writes).toBeGreaterThanOrEqual(5);
      expect(writes).toBeLessThanOrEqual(7);
      await handle.terminate('test done');
    } finally {
      controller.shutdown();
      agent.shutdown();
      await Promise.all(runs);
    }
  });
});
