#!/usr/bin/env node
// What one loop costs the controller's workflow sandbox, without a server: the real workflow
// bundle (built as the worker builds it, from dist/) is loaded into the SDK's own reusable V8
// context (the creator each workflow thread of a worker runs), and N reconcileNode workflows are
// created and started there, each running its first activation up to its first command (the
// authority read), as a worker does when a loop starts or is evicted and replayed.
//
//   node bench/workflow-sandbox.mjs [--loops 50] [--tracing] [--snapshot FILE.heapsnapshot] [--list]
//
// Prints JSON: the bundle (bytes, modules, by package), the modules each loop evaluates (its own
// module cache), the heap each cached loop retains (used heap after a full GC, divided by N) and
// the CPU to create one (creation + first activation, the median of N). --tracing bundles the
// tracing interceptor as a worker with tracing on does. --snapshot writes a heap snapshot with
// the N loops alive, for bench/heap-snapshot.mjs; --list names the modules each loop evaluates.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import { build } from '../scripts/build.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);

const { values: args } = parseArgs({
  options: {
    loops: { type: 'string', default: '50' },
    tracing: { type: 'boolean', default: false },
    snapshot: { type: 'string' },
    list: { type: 'boolean', default: false },
  },
});
const LOOPS = Number(args.loops);
if (!Number.isInteger(LOOPS) || LOOPS < 1) {
  console.error('usage: node bench/workflow-sandbox.mjs [--loops N] [--tracing] [--snapshot FILE] [--list]');
  process.exit(2);
}

build();
// Full GCs between measurements: without --expose-gc, turned on here for this process.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

const { bundleWorkflowCode } = require('@temporalio/worker');
const { parseWorkflowCode } = require('@temporalio/worker/lib/worker');
const { ReusableVMWorkflowCreator } = require('@temporalio/worker/lib/workflow/reusable-vm');
const { defaultPayloadConverter } = require('@temporalio/common');
const { coresdk } = require('@temporalio/proto');
const { workflowBundleOptions } = require(path.join(root, 'dist/src/worker/bundle.js'));
const { createControlActivities } = require(path.join(root, 'dist/src/activities/index.js'));

const drop = () => undefined;
const quiet = { trace: drop, debug: drop, info: drop, log: drop, warn: drop, error: (m) => console.error(m) };
const bundle = await bundleWorkflowCode({ ...workflowBundleOptions({ tracing: args.tracing }), logger: quiet });

/** The bundle's modules (webpack's ids, "./node_modules/zod/v4/…" or "./dist/src/…") by package. */
function inventory(code) {
  const ids = [...code.matchAll(/^\/\*\*\*\/ "([^"]+)"$/gm)].map((m) => m[1]);
  const byPackage = {};
  for (const id of ids) {
    const parts = id.split('/');
    const i = parts.lastIndexOf('node_modules');
    const name =
      i < 0 ? parts.slice(1, 4).join('/') : parts[i + 1].startsWith('@') ? `${parts[i + 1]}/${parts[i + 2]}` : parts[i + 1];
    byPackage[name] = (byPackage[name] ?? 0) + 1;
  }
  return { ids, byPackage: Object.fromEntries(Object.entries(byPackage).sort((a, b) => b[1] - a[1])) };
}

// The controller's activities, by name (a loop's first command is its authority read).
const activityNames = new Set(Object.keys(createControlActivities({ fleetDir: root })));
// As Worker.create loads a bundle: its inline source map taken apart from the code.
const creator = await ReusableVMWorkflowCreator.create(parseWorkflowCode(bundle.code), 5000, activityNames, undefined);
const now = Date.parse('2026-12-01T12:00:00Z');

/** One reconcileNode, created and run to its first command, as a worker starts a loop. */
async function startLoop(i) {
  const runId = `run-${i}`;
  const workflowId = `datum/BENCH-${i}/gen-1`;
  const info = {
    workflowId,
    runId,
    workflowType: 'reconcileNode',
    searchAttributes: {},
    taskQueue: 'datum-control',
    namespace: 'default',
    firstExecutionRunId: runId,
    originalExecutionRunId: runId,
    startTime: new Date(now),
    runStartTime: new Date(now),
    taskTimeoutMs: 10_000,
    attempt: 1,
    historyLength: 3,
    historySize: 0,
    continueAsNewSuggested: false,
    suggestedContinueAsNewReasons: [],
    currentBuildId: '',
    unsafe: { now: () => now, isReplaying: false, isReplayingHistoryEvents: false },
    priority: {},
  };
  const workflow = await creator.createWorkflow({ info, randomnessSeed: [0, 0, 0, i], now, showStackTraceSources: false });
  const completion = await workflow.activate(
    coresdk.workflow_activation.WorkflowActivation.fromObject({
      runId,
      timestamp: { seconds: now / 1000 },
      historyLength: 3,
      jobs: [
        {
          initializeWorkflow: {
            workflowId,
            workflowType: 'reconcileNode',
            arguments: [defaultPayloadConverter.toPayload({ node: `BENCH-${i}`, generation: 1 })],
            randomnessSeed: i,
            firstExecutionRunId: runId,
            attempt: 1,
            startTime: { seconds: now / 1000 },
            workflowTaskTimeout: { seconds: 10 },
            headers: {},
          },
        },
      ],
    }),
  );
  const commands = completion.successful?.commands ?? [];
  if (commands.length === 0) throw new Error(`loop ${i} issued no command: ${JSON.stringify(completion.failed ?? completion)}`);
  return workflow;
}

// One loop first, outside the figures: it compiles the bundle's functions once for all.
const warm = await startLoop(-1);
await warm.dispose();
gc();
const heapBefore = v8.getHeapStatistics().used_heap_size;
const loops = [];
const cpuMs = [];
for (let i = 0; i < LOOPS; i++) {
  const cpu = process.cpuUsage();
  loops.push(await startLoop(i));
  const spent = process.cpuUsage(cpu);
  cpuMs.push((spent.user + spent.system) / 1000);
}
gc();
const heapAfter = v8.getHeapStatistics().used_heap_size;
const modulesPerLoop = loops.map((w) => w.activator.moduleCache.size);
if (args.snapshot) v8.writeHeapSnapshot(args.snapshot);

const { ids, byPackage } = inventory(bundle.code);
const sorted = [...cpuMs].sort((a, b) => a - b);
const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const evaluated = [...loops[0].activator.moduleCache.keys()];
const result = {
  tracing: args.tracing,
  loops: LOOPS,
  bundle: {
    bytes: Buffer.byteLength(bundle.code),
    modules: ids.length,
    by_package: byPackage,
    zod_modules: ids.filter((id) => id.includes('/node_modules/zod/')).length,
    opentelemetry_modules: ids.filter((id) => id.includes('/node_modules/@opentelemetry/')).length,
  },
  modules_per_loop: Math.max(...modulesPerLoop),
  module_bytes_per_loop: evaluated.reduce((sum, id) => sum + (bundleModuleBytes(bundle.code, id) ?? 0), 0),
  heap_per_loop_mb: Number(((heapAfter - heapBefore) / LOOPS / 2 ** 20).toFixed(3)),
  cpu_to_create_ms: { p50: Number(at(0.5).toFixed(2)), p90: Number(at(0.9).toFixed(2)), max: Number(sorted.at(-1).toFixed(2)) },
  ...(args.snapshot ? { snapshot: args.snapshot } : {}),
  ...(args.list ? { evaluated_per_loop: evaluated } : {}),
};
console.log(JSON.stringify(result, null, 2));
for (const w of loops) await w.dispose();
await creator.destroy();

/** The source size of one module of the bundle, from its id to the next module's. */
function bundleModuleBytes(code, id) {
  const start = code.indexOf(`/***/ "${id}"\n`);
  if (start < 0) return null;
  const end = code.indexOf('\n/***/ "', start + 1);
  return (end < 0 ? code.length : end) - start;
}
