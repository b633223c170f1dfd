import { bundleWorkflowCode } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { workflowBundleOptions } from '../../src/worker/bundle';

/*
 * What the workflow sandbox loads (issue 19, must-show 1). Every cached loop evaluates the
 * bundle's modules again, in its own module cache, so the bundle a worker builds without tracing
 * holds neither zod nor OpenTelemetry: the workflows judge what they read from outside with the
 * contract's checks (zod and the formats' schemas, src/schemas, stay at the edges), and the tracing
 * interceptor is bundled only for a worker that traces. bench/workflow-sandbox.mjs measures what a
 * loop costs.
 */

const drop = () => undefined;
const quiet = { trace: drop, debug: drop, info: drop, log: drop, warn: drop, error: drop };

/** The bundle's modules, by webpack's ids ("./node_modules/@opentelemetry/api/…", "./src/domain/…"). */
async function bundledModules(tracing: boolean): Promise<string[]> {
  const { code } = await bundleWorkflowCode({ ...workflowBundleOptions({ tracing }), logger: quiet });
  return [...code.matchAll(/^\/\*\*\*\/ "([^"]+)"$/gm)].map((m) => m[1]);
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

  it('a worker that traces bundles the tracing interceptor, and OpenTelemetry with it', async () => {
    const modules = await bundledModules(true);
    expect(modules).toContain('./src/workflows/interceptors/tracing.ts');
    expect(modules.some((m) => m.includes('/node_modules/@opentelemetry/api/'))).toBe(true);
  });
});
