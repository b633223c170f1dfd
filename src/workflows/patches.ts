/*
 * The one way workflow code asks a patch: by its id from the registry (src/contract/patches.ts),
 * at the stage the registry gives it. Lint refuses `patched` and `deprecatePatch` anywhere else.
 */
import { deprecatePatch, patched, proxySinks } from '@temporalio/workflow';
import { PATCHES, PATCH_SINK, WORKFLOW_PATCH, type DatumPatchSinks, type PatchId } from '../contract';
import type { RolloutWaits } from '../domain';

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

/**
 * rollout-waits-out-stale-retake and rollout-waits-out-reprobe, for settlesRollout and
 * judgeGateNode (each asked only where it changes the outcome).
 */
export const ROLLOUT_WAITS: RolloutWaits = {
  staleRetake: () => inForce(WORKFLOW_PATCH.rolloutWaitsOutStaleRetake),
  reprobe: () => inForce(WORKFLOW_PATCH.rolloutWaitsOutReprobe),
};
