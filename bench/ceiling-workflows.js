// The engine's shaped ceiling for the bench (issue 33): a rollout and a loop per node with the
// event shape of Datum's, whose activities do nothing. The loop's first pass records what a
// Datum loop's rollout pass records (bench/run.mjs, `temporal workflow show` of a loop): patch
// markers and search-attribute upserts, the control reads as local activities, an observe and
// the applies on the node's own queue (the last apply brings the probe back), a memo, the settled signal to the rollout, the
// watch (watch mode) and the resync timer; each later pass, a local activity, an observe, a
// local activity and an upsert, as a Datum loop's steady pass. The rollout starts the loops from
// an activity, all of them in flight at once, and ends when every loop has said it settled.
'use strict';
const {
  condition,
  defineSignal,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} = require('@temporalio/workflow');
const { defineSearchAttributeKey, SearchAttributeType } = require('@temporalio/common');

const settledSignal = defineSignal('nodeSettled');
const DatumStatus = defineSearchAttributeKey('DatumStatus', SearchAttributeType.KEYWORD);
const DatumMode = defineSearchAttributeKey('DatumMode', SearchAttributeType.KEYWORD);
const DatumConditions = defineSearchAttributeKey('DatumConditions', SearchAttributeType.KEYWORD_LIST);

// The controller's reads of the authority and its ledger writes, as Datum runs them: local activities.
const control = proxyLocalActivities({ startToCloseTimeout: '1m' });
// The rollout's start of its loops, a regular activity on the controller's queue, as Datum's.
const starting = proxyActivities({ startToCloseTimeout: '10m', heartbeatTimeout: '1m' });

/** The node's queue, with the timeouts of Datum's agent activities (src/workflows/agents.ts). */
function nodeActivities(queue) {
  const base = { taskQueue: queue, scheduleToStartTimeout: '60s', heartbeatTimeout: '30s' };
  const retry = { initialInterval: '1s', backoffCoefficient: 2, maximumAttempts: 3 };
  return {
    agent: proxyActivities({ ...base, startToCloseTimeout: '5m', retry }),
    watcher: proxyActivities({ ...base, heartbeatTimeout: '5m', startToCloseTimeout: '11m', retry: { maximumAttempts: 1 } }),
  };
}

/**
 * `{ nodes, applies, watch, resync_ms, batch, lanes }`: every node's loop started, then each one's
 * settled signal. Returns how many settled, and how many of them without reaching their node (as a
 * Datum loop settles BLOCKED/NODE_UNREACHABLE): the ceiling ends even when the engine drops tasks.
 */
async function shapedRollout(input) {
  const told = new Set();
  const unreached = new Set();
  setHandler(settledSignal, (payload) => {
    told.add(payload.workflow_id);
    if (payload.unreached) unreached.add(payload.workflow_id);
  });
  patched('bench-rollout');
  upsertSearchAttributes([{ key: DatumStatus, value: 'ROLLING_OUT' }]);
  const batches = [];
  for (let i = 0; i < input.nodes.length; i += input.batch) batches.push(input.nodes.slice(i, i + input.batch));
  let next = 0;
  const lane = async () => {
    while (next < batches.length) {
      const nodes = batches[next++];
      await starting.startLoops({ ...input, nodes, report_to: workflowInfo().workflowId });
    }
  };
  await Promise.all(Array.from({ length: Math.min(input.lanes, batches.length) }, lane));
  await condition(() => told.size >= input.nodes.length);
  upsertSearchAttributes([{ key: DatumStatus, value: 'SETTLED' }]);
  return { settled: told.size, unreached: unreached.size };
}

/** `{ node, queue, applies, watch, resync_ms, report_to }`: one node's loop, until it is terminated. */
async function shapedLoop(input) {
  const { agent, watcher } = nodeActivities(input.queue);
  const attributes = [
    [DatumStatus, 'RECONCILING'],
    [DatumMode, 'enforce'],
    [DatumConditions, []],
    [DatumStatus, 'OBSERVING'],
  ];
  for (const [i, [key, value]] of attributes.entries()) {
    patched(`bench-loop-${i}`);
    upsertSearchAttributes([{ key, value }]);
  }
  for (let i = 0; i < 3; i++) await control.noop();
  try {
    await agent.observe();
    await control.noop();
    // The last apply carries the probe back (Datum's apply-hands-back-probe): no observe after it.
    for (let i = 0; i < input.applies; i++) await agent.apply();
  } catch {
    // No agent took the task in time (or it failed): the loop settles unreached, as Datum's
    // settles BLOCKED/NODE_UNREACHABLE, so the rollout hears from every loop and ends.
    upsertSearchAttributes([{ key: DatumStatus, value: 'BLOCKED' }]);
    await getExternalWorkflowHandle(input.report_to).signal(settledSignal, {
      workflow_id: workflowInfo().workflowId,
      unreached: true,
    });
    return;
  }
  upsertSearchAttributes([{ key: DatumStatus, value: 'VERIFYING' }]);
  patched('bench-loop-settled');
  upsertSearchAttributes([{ key: DatumStatus, value: 'CONVERGED' }]);
  upsertMemo({ decision: { status: 'CONVERGED' } });
  await control.noop();
  await control.noop();
  const told = getExternalWorkflowHandle(input.report_to).signal(settledSignal, { workflow_id: workflowInfo().workflowId });
  if (input.watch) watcher.watch().catch(() => undefined);
  await told;
  for (;;) {
    await condition(() => false, input.resync_ms);
    await control.noop();
    await agent.observe();
    await control.noop();
    upsertSearchAttributes([{ key: DatumStatus, value: 'CONVERGED' }]);
  }
}

module.exports = { shapedRollout, shapedLoop };
