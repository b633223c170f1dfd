import { existsSync } from 'node:fs';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { bundleWorkflowCode, type WorkflowBundlePath } from '@temporalio/worker';
import { withFix } from '../contract';
import { workflowsPath } from './paths';

/*
 * The controller's workflow code, bundled ahead of time. Without it, every `datum worker` start
 * runs webpack over src/workflows (seconds of CPU, and @swc/core loaded, on every restart of
 * every replica). The image bundles once at build time (`node scripts/bundle-workflows.mjs
 * FILE`, which calls writeWorkflowBundles: FILE, and FILE's variant with tracing beside it) and
 * sets DATUM_WORKFLOW_BUNDLE to the file; a worker that traces loads the other.
 *
 * Opt-in by the variable, not picked up because a file happens to lie next to dist/: a bundle
 * left from an older checkout would run old workflow code under new activities, and a replay
 * break would show up only in production.
 */

export const WORKFLOW_BUNDLE_ENV = 'DATUM_WORKFLOW_BUNDLE';

/**
 * Which bundle of Datum's workflows: with tracing (the worker exports spans) or without. The
 * tracing interceptor (src/workflows/interceptors/tracing.ts) brings OpenTelemetry into the
 * sandbox, where every cached loop evaluates its modules again; a worker that does not trace
 * bundles without it, so its loops load no OpenTelemetry at all (bench/workflow-sandbox.mjs).
 */
export interface BundleVariant {
  tracing: boolean;
}

/** The workflow interceptor modules of a variant, next to the workflow entry point (.ts from source, .js from dist). */
export function workflowInterceptorModules({ tracing }: BundleVariant): string[] {
  if (!tracing) return [];
  const entry = workflowsPath();
  return [path.join(path.dirname(entry), 'interceptors', `tracing${path.extname(entry)}`)];
}

/** bundleWorkflowCode's options for Datum's workflows: the entry point and the variant's interceptor modules. */
export function workflowBundleOptions(variant: BundleVariant = { tracing: false }): {
  workflowsPath: string;
  workflowInterceptorModules: string[];
} {
  return { workflowsPath: workflowsPath(), workflowInterceptorModules: workflowInterceptorModules(variant) };
}

/** Where a variant of the prebuilt bundle lies: the file itself without tracing, `<name>.traced.js` beside it with. */
export function prebuiltBundleFile(file: string, { tracing }: BundleVariant): string {
  if (!tracing) return file;
  const ext = path.extname(file);
  return `${file.slice(0, file.length - ext.length)}.traced${ext || '.js'}`;
}

/** DATUM_WORKFLOW_BUNDLE names a file that is not there. */
export class WorkflowBundleError extends Error {
  override readonly name = 'WorkflowBundleError';
}

/**
 * Worker.create's workflow source for a variant: the prebuilt bundle DATUM_WORKFLOW_BUNDLE names
 * (or its traced sibling), else src/workflows bundled at start.
 */
export function workflowSource(variant: BundleVariant): { workflowBundle: WorkflowBundlePath } | { workflowsPath: string } {
  const configured = process.env[WORKFLOW_BUNDLE_ENV]?.trim();
  // Bundled at start: the caller passes workflowInterceptorModules(variant) as interceptors.workflowModules.
  if (!configured) return { workflowsPath: workflowsPath() };
  const codePath = prebuiltBundleFile(path.resolve(configured), variant);
  if (!existsSync(codePath)) {
    throw new WorkflowBundleError(
      withFix(
        `no workflow bundle at ${codePath} (from ${WORKFLOW_BUNDLE_ENV}${variant.tracing ? ', the variant for a worker that traces' : ''})`,
        `build it with \`node scripts/bundle-workflows.mjs ${configured}\` after \`npm run build\` (it writes both variants), or unset ${WORKFLOW_BUNDLE_ENV} to bundle the workflows at start`,
      ),
    );
  }
  return { workflowBundle: { codePath } };
}

/** Bundles src/workflows (as the worker would at start) into `file`, and the variant with tracing beside it; each written atomically. */
export async function writeWorkflowBundles(file: string): Promise<{ file: string; bytes: number; tracing: boolean }[]> {
  const written = [];
  for (const tracing of [false, true]) {
    const { code } = await bundleWorkflowCode(workflowBundleOptions({ tracing }));
    const target = prebuiltBundleFile(path.resolve(file), { tracing });
    await mkdir(path.dirname(target), { recursive: true });
    const tmp = `${target}.${process.pid}.tmp`;
    await writeFile(tmp, code);
    await rename(tmp, target);
    written.push({ file: target, bytes: Buffer.byteLength(code), tracing });
  }
  return written;
}
