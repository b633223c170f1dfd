#!/usr/bin/env node
// The shaped ceiling's controller (bench/run.mjs, issue 33): a process of its own, so its CPU and
// memory are read apart, running bench/ceiling-workflows.js with the controller worker's tuning
// (controllerWorkerTuning, src/worker/controller.ts). Its local activities do nothing; its one
// regular activity starts the rollout's loops as Datum's prepareRolloutNodes does: 16 at a time,
// each with the node's search attributes, attaching to a loop already running.
//
//   node bench/ceiling-controller.js --address 127.0.0.1:7233 --task-queue bench-ceiling
'use strict';
const path = require('node:path');
const { parseArgs } = require('node:util');
const { Client, Connection } = require('@temporalio/client');
const { TypedSearchAttributes, defineSearchAttributeKey, SearchAttributeType } = require('@temporalio/common');
const { NativeConnection, Worker } = require('@temporalio/worker');

const dist = (p) => path.join(__dirname, '..', 'dist', 'src', p);
const { controllerWorkerTuning } = require(dist('worker/controller.js'));
const { mapLimit } = require(dist('activities/map-limit.js'));

const DatumNode = defineSearchAttributeKey('DatumNode', SearchAttributeType.KEYWORD);
const DatumGeneration = defineSearchAttributeKey('DatumGeneration', SearchAttributeType.INT);
const DatumDigest = defineSearchAttributeKey('DatumDigest', SearchAttributeType.KEYWORD);

/** The workflow id of the ceiling's loop for `node`. */
const loopId = (node) => `bench-ceiling/${node}`;

async function main() {
  const { values } = parseArgs({ options: { address: { type: 'string' }, 'task-queue': { type: 'string' } } });
  if (!values.address || !values['task-queue'])
    throw new Error('usage: node bench/ceiling-controller.js --address HOST:PORT --task-queue QUEUE');
  const taskQueue = values['task-queue'];
  const connection = await NativeConnection.connect({ address: values.address });
  const client = new Client({ connection: await Connection.connect({ address: values.address }) });
  const startLoops = async ({ nodes, applies, watch, resync_ms, report_to, node_queue_prefix }) => {
    await mapLimit(nodes, 16, (node) =>
      client.workflow.start('shapedLoop', {
        taskQueue,
        workflowId: loopId(node),
        args: [{ node, queue: `${node_queue_prefix}${node}`, applies, watch, resync_ms, report_to }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: new TypedSearchAttributes([
          { key: DatumNode, value: node },
          { key: DatumGeneration, value: 1 },
          { key: DatumDigest, value: 'bench-ceiling' },
        ]),
      }),
    );
    return nodes.length;
  };
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowsPath: path.join(__dirname, 'ceiling-workflows.js'),
    activities: { noop: () => Promise.resolve(), startLoops },
    ...controllerWorkerTuning(),
  });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => worker.shutdown());
  await worker.run();
  await client.connection.close();
  await connection.close();
}

main().catch((error) => {
  console.error(`ceiling-controller: ${error.stack ?? error}`);
  process.exit(1);
});
