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
 * FILE`, which calls writeWorkflowBundle) and sets DATUM_WORKFLOW_BUNDLE to the file.
 *
 * Opt-in by the variable, not picked up because a file happens to lie next to dist/: a bundle
 * left from an older checkout would run old workflow code under new activities, and a replay
 * break would show up only in production.
 */

export const WORKFLOW_BUNDLE_ENV = 'DATUM_WORKFLOW_BUNDLE';

/**
 * The workflow interceptor modules (src/workflows/interceptors/<name>) every bundle of Datum's
 * workflows carries, the worker's own and the prebuilt image's alike: a module missing from a
 * bundle would silently drop what it adds (metric labels, trace context).
 */
const WORKFLOW_INTERCEPTOR_MODULES: readonly string[] = ['tracing'];

/** The files of WORKFLOW_INTERCEPTOR_MODULES, next to the workflow entry point (.ts from source, .js from dist). */
export function workflowInterceptorModules(): string[] {
  const entry = workflowsPath();
  const dir = path.join(path.dirname(entry), 'interceptors');
  return WORKFLOW_INTERCEPTOR_MODULES.map((name) => path.join(dir, `${name}${path.extname(entry)}`));
}

/** bundleWorkflowCode's options for Datum's workflows: the entry point and the interceptor modules. */
export function workflowBundleOptions(): { workflowsPath: string; workflowInterceptorModules: string[] } {
  return { workflowsPath: workflowsPath(), workflowInterceptorModules: workflowInterceptorModules() };
}

/** DATUM_WORKFLOW_BUNDLE names a file that is not there. */
export class WorkflowBundleError extends Error {
  override readonly name = 'WorkflowBundleError';
}

/** Worker.create's workflow source: the prebuilt bundle DATUM_WORKFLOW_BUNDLE names, else src/workflows bundled at start. */
export function workflowSource(): { workflowBundle: WorkflowBundlePath } | { workflowsPath: string } {
  const configured = process.env[WORKFLOW_BUNDLE_ENV]?.trim();
  // Bundled at start: the caller passes workflowInterceptorModules() as interceptors.workflowModules.
  if (!configured) return { workflowsPath: workflowsPath() };
  const codePath = path.resolve(configured);
  if (!existsSync(codePath)) {
    throw new WorkflowBundleError(
      withFix(
        `no workflow bundle at ${codePath} (from ${WORKFLOW_BUNDLE_ENV})`,
        `build it with \`node scripts/bundle-workflows.mjs ${configured}\` after \`npm run build\`, or unset ${WORKFLOW_BUNDLE_ENV} to bundle the workflows at start`,
      ),
    );
  }
  return { workflowBundle: { codePath } };
}

/** Bundles src/workflows (as the worker would at start) into `file`, written atomically. */
export async function writeWorkflowBundle(file: string): Promise<{ file: string; bytes: number }> {
  const { code } = await bundleWorkflowCode(workflowBundleOptions());
  const target = path.resolve(file);
  await mkdir(path.dirname(target), { recursive: true });
  const tmp = `${target}.${process.pid}.tmp`;
  await writeFile(tmp, code);
  await rename(tmp, target);
  return { file: target, bytes: Buffer.byteLength(code) };
}
