import { Runtime, type InjectedSinks } from '@temporalio/worker';
import type { Logger } from '@temporalio/common';
import type { WorkflowInfo } from '@temporalio/workflow';
import { PATCH_SINK, type DatumPatchSinks, type PatchId } from '../contract';

/**
 * The worker end of PATCH_SINK (src/workflows/patches.ts): a run recorded before a patch reports
 * each point where its replay takes the patch's old branch. Logged at debug level: which patches
 * the fleet's loops still depend on is what retiring one waits for (docs/production.md, "Upgrading").
 */
export function workflowPatchSinks(logger: Logger = Runtime.instance().logger): InjectedSinks<DatumPatchSinks> {
  return {
    [PATCH_SINK]: {
      oldBranch: {
        fn(info: WorkflowInfo, patch: PatchId) {
          logger.debug('a run recorded before a patch replays its old branch', {
            patch,
            workflow_id: info.workflowId,
            run_id: info.runId,
          });
        },
        // An old branch is only ever taken while replaying.
        callDuringReplay: true,
      },
    },
  };
}
