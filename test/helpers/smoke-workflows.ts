// Workflows for the toolchain smoke test (test/integration/toolchain.test.ts). Sandbox rules apply:
// no Node built-ins, activities imported type-only.

import { proxyActivities, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import type * as activities from './smoke-activities';
import { DatumStatus } from './search-attributes';

const { greet } = proxyActivities<typeof activities>({ startToCloseTimeout: '30 seconds' });

/** Calls one activity, then marks itself DatumStatus=SMOKE so the test can find it through visibility. */
export async function smokeWorkflow(name: string): Promise<string> {
  const greeting = await greet(name);
  upsertSearchAttributes([{ key: DatumStatus, value: 'SMOKE' }]);
  return greeting;
}

/** Sleeps two days of workflow time and reports how much workflow time it saw pass. */
export async function sleepTwoDaysWorkflow(): Promise<{ startedAt: number; elapsedMs: number }> {
  // Date.now() in the sandbox is the workflow task's time, advanced by the server's clock:
  // on the time-skipping server it jumps over the timer.
  const startedAt = Date.now();
  await sleep('2 days');
  return { startedAt, elapsedMs: Date.now() - startedAt };
}
