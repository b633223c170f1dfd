import { log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { FLEET_WORKFLOW_ID, fleetViewQuery, type PassReport, type ReportCheck } from '../contract';
import { fleetReportMismatch } from '../domain';

/**
 * A report that names the fleet workflow, checked against what the fleet holds now (its `view`
 * query): a work item takes a fleet condition's facts only from the fleet itself (issue 30).
 */
export async function confirmFleetReport(c: Client, report: PassReport): Promise<ReportCheck> {
  try {
    const view = await c.workflow.getHandle(FLEET_WORKFLOW_ID).query(fleetViewQuery);
    const mismatch = fleetReportMismatch(view, report);
    return mismatch === null ? { confirmed: true, source: 'fleet' } : { confirmed: false, why: mismatch };
  } catch (error) {
    log.info('a report could not be checked against the fleet workflow', { error: String(error) });
    return { confirmed: false, why: `the fleet workflow cannot be asked: ${(error as Error).message}` };
  }
}
