/*
 * The one way workflow code asks a patch: by its id from the registry (src/contract/patches.ts),
 * at the stage the registry gives it. Lint refuses `patched` and `deprecatePatch` anywhere else.
 */
import { deprecatePatch, patched, proxySinks } from '@temporalio/workflow';
import { PATCHES, PATCH_SINK, WORKFLOW_PATCH, type DatumPatchSinks, type PatchId } from '../contract';

const sink = proxySinks<DatumPatchSinks>()[PATCH_SINK];

/**
 * Whether a patch is in force for this run: false only while a run recorded before it replays
 * the point where it is asked, which is reported through PATCH_SINK. A deprecated patch is in
 * force everywhere.
 */
export function inForce(id: PatchId): boolean {
  if (PATCHES[id].stage === 'deprecated') {
    deprecatePatch(id);
    return true;
  }
  if (patched(id)) return true;
  sink.oldBranch(id);
  return false;
}

/** rollout-waits-out-stale-retake, for settlesRollout and judgeGateNode (asked only where it changes the outcome). */
export const waitsOutStaleRetakes = (): boolean => inForce(WORKFLOW_PATCH.rolloutWaitsOutStaleRetake);
