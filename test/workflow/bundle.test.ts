import os from 'node:os';
import vm from 'node:vm';
import { defaultPayloadConverter } from '@temporalio/common';
import { coresdk } from '@temporalio/proto';
import { bundleWorkflowCode } from '@temporalio/worker';
import { parseWorkflowCode } from '@temporalio/worker/lib/worker';
import type { Workflow } from '@temporalio/worker/lib/workflow/interface';
import { ReusableVMWorkflowCreator } from '@temporalio/worker/lib/workflow/reusable-vm';
import { describe, expect, it } from 'vitest';
import { createControlActivities } from '../../src/activities';
import { workflowBundleOptions } from '../../src/worker/bundle';

/*
 * What the workflow sandbox loads (issue 19, must-show 1). Every cached loop evaluates the
 * workflows' modules again, in its own module cache, so the bundle a worker builds without tracing
 * holds neither zod nor OpenTelemetry: the workflows judge what they read from outside with the
 * contract's checks (zod and the formats' schemas, src/schemas, stay at the edges), and the tracing
 * interceptor is bundled only for a worker that traces. The contract and the domain are evaluated
 * once, frozen, and shared by every loop (src/worker/bundle.ts, issue 33). bench/workflow-sandbox.mjs
 * measures what a loop costs.
 */

const drop = () => undefined;
const quiet = { trace: drop, debug: drop, info: drop, log: drop, warn: drop, error: drop };

/** The bundle's modules, by webpack's ids ("./node_modules/@opentelemetry/api/…", "./src/domain/…"). */
async function bundledModules(tracing: boolean): Promise<string[]> {
  const { code } = await bundleWorkflowCode({ ...workflowBundleOptions({ tracing }), logger: quiet });
  return [...code.matchAll(/^\/\*\*\*\/ "([^"]+)"$/gm)].map((m) => m[1]);
}

const NOW = Date.parse('2026-12-01T12:00:00Z');

/** A reconcileNode created in the SDK's reusable context and run to its first command, as a worker starts a loop. */
async function startLoop(
  creator: ReusableVMWorkflowCreator,
  i: number,
): Promise<Workflow & { activator?: { moduleCache: Map<string, unknown> } }> {
  const runId = `run-${i}`;
  const workflowId = `datum/SHARE-${i}/gen-1`;
  const start = new Date(NOW);
  const workflow = await creator.createWorkflow({
    info: {
      workflowId,
      runId,
      workflowType: 'reconcileNode',
      searchAttributes: {},
      typedSearchAttributes: undefined as never,
      taskQueue: 'datum-control',
      namespace: 'default',
      firstExecutionRunId: runId,
      originalExecutionRunId: runId,
      startTime: start,
      runStartTime: start,
      taskTimeoutMs: 10_000,
      attempt: 1,
      historyLength: 3,
      historySize: 0,
      continueAsNewSuggested: false,
      currentBuildId: '',
      unsafe: { now: () => NOW, isReplaying: false },
      priority: {},
    } as never,
    randomnessSeed: [0, 0, 0, i],
    now: NOW,
    showStackTraceSources: false,
  });
  const completion = await workflow.activate(
    coresdk.workflow_activation.WorkflowActivation.fromObject({
      runId,
      timestamp: { seconds: NOW / 1000 },
      historyLength: 3,
      jobs: [
        {
          initializeWorkflow: {
            workflowId,
            workflowType: 'reconcileNode',
            arguments: [defaultPayloadConverter.toPayload({ node: `SHARE-${i}`, generation: 1 })],
            randomnessSeed: i,
            firstExecutionRunId: runId,
            attempt: 1,
            startTime: { seconds: NOW / 1000 },
            workflowTaskTimeout: { seconds: 10 },
            headers: {},
          },
        },
      ],
    }),
  );
  // Its first command is the authority read: a loop that failed to load its modules issues none.
  expect(completion.successful?.commands?.length ?? 0, JSON.stringify(completion.failed ?? completion)).toBeGreaterThan(0);
  return workflow;
}

/** What a loop must not load when its worker does not trace. */
const NOT_IN_THE_SANDBOX = [
  /\/node_modules\/zod\//,
  /\/src\/schemas\//,
  /\/node_modules\/@opentelemetry\//,
  /\/src\/workflows\/interceptors\/tracing/,
];

describe('the workflow bundle', () => {
  it('a worker without tracing bundles no zod, none of the schemas and no OpenTelemetry', async () => {
    const modules = await bundledModules(false);
    // The workflows and the domain are there (a bundle whose modules were not found would pass anything).
    expect(modules).toContain('./src/workflows/reconcileNode.ts');
    expect(modules.filter((m) => NOT_IN_THE_SANDBOX.some((re) => re.test(m)))).toEqual([]);
  });

  it('cached loops share one copy of the contract and the domain, frozen, and each keeps its workflow modules to itself', async () => {
    const { code } = await bundleWorkflowCode({ ...workflowBundleOptions(), logger: quiet });
    const activities = new Set(Object.keys(createControlActivities({ fleetDir: os.tmpdir() })));
    const creator = await ReusableVMWorkflowCreator.create(parseWorkflowCode(code), 5000, activities);
    const loops = [await startLoop(creator, 1), await startLoop(creator, 2)];
    try {
      for (const loop of loops) {
        const own = [...(loop.activator?.moduleCache.keys() ?? [])];
        // A loop's module scope holds its own state: its workflow modules are its own...
        expect(own).toContain('./src/workflows/reconcileNode.ts');
        // ...while the pure core is evaluated once, before any loop, for all of them.
        expect(own.filter((m) => /\/src\/(domain|contract)\//.test(m))).toEqual([]);
      }
      // What the loops share is frozen: no loop can leave anything there for another to read.
      const shared = vm.runInContext(
        '__webpack_module_cache__',
        (creator as unknown as { context: vm.Context }).context,
      ) as Record<string, { exports: Record<string, unknown> } | undefined>;
      for (const id of ['./src/domain/index.ts', './src/contract/vocabulary.ts', './src/domain/plan.ts']) {
        const exports = shared[id]?.exports;
        expect(exports, id).toBeDefined();
        expect(Object.isFrozen(exports), id).toBe(true);
      }
      const { STATUSES } = shared['./src/contract/vocabulary.ts']!.exports as { STATUSES: unknown[] };
      // The error is the sandbox's TypeError, another realm's: matched by its message.
      expect(() => STATUSES.push('FORGED')).toThrow(/not extensible/);
    } finally {
      for (const loop of loops) await loop.dispose();
      await creator.destroy();
    }
  });

  it('a worker that traces bundles the tracing interceptor, and OpenTelemetry with it', async () => {
    const modules = await bundledModules(true);
    expect(modules).toContain('./src/workflows/interceptors/tracing.ts');
    expect(modules.some((m) => m.includes('/node_modules/@opentelemetry/api/'))).toBe(true);
  });
});
