#!/usr/bin/env node
// The shaped ceiling's agent (bench/run.mjs, issue 33): a no-op agent process serving one queue
// per virtual node on one connection, with the node worker's tuning (nodeWorkerTuning,
// src/agent/worker.ts), as the Datum agent serves its nodes. Observe and apply return at once;
// a watch beats now and then, as Datum's does, until it is cancelled.
//
//   node bench/ceiling-agent.js --address 127.0.0.1:7233 --queues queues.json
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { parseArgs } = require('node:util');
const { Context } = require('@temporalio/activity');
const { NativeConnection, Worker } = require('@temporalio/worker');

const { nodeWorkerTuning } = require(path.join(__dirname, '..', 'dist', 'src', 'agent', 'worker.js'));

const activities = {
  observe: () => Promise.resolve({}),
  apply: () => Promise.resolve({}),
  async watch() {
    const ctx = Context.current();
    const beat = setInterval(() => ctx.heartbeat(), 60_000);
    try {
      await ctx.cancelled;
    } catch {
      // Cancelled, or its loop is gone: the watch ends as Datum's does.
    } finally {
      clearInterval(beat);
    }
  },
};

async function main() {
  const { values } = parseArgs({ options: { address: { type: 'string' }, queues: { type: 'string' } } });
  if (!values.address || !values.queues)
    throw new Error('usage: node bench/ceiling-agent.js --address HOST:PORT --queues FILE (a JSON list of task queues)');
  const queues = JSON.parse(fs.readFileSync(values.queues, 'utf8'));
  const connection = await NativeConnection.connect({ address: values.address });
  const workers = [];
  for (const taskQueue of queues) workers.push(await Worker.create({ connection, taskQueue, activities, ...nodeWorkerTuning() }));
  const stop = () => {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
  };
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, stop);
  await Promise.all(workers.map((w) => w.run()));
  await connection.close();
}

main().catch((error) => {
  console.error(`ceiling-agent: ${error.stack ?? error}`);
  process.exit(1);
});
