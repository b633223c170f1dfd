/*
 * The fleet's side of work items (docs/work-items.md, "The fleet's items"): a fleet condition that
 * needs a decision (a node without a loop, a loop without desired state) opens an item, told by
 * the look that finds it and closed by the look that no longer does. A resolution reaches the
 * fleet by the same resolveWork Update a loop takes; the fleet takes only `hold`, which records
 * who decided that the node stays as it is. Which items a look tells is the domain's (fleetWork).
 */
import { log, proxyLocalActivities } from '@temporalio/workflow';
import { FLEET_WORK_CONDITIONS, fleetWork, parseLoopResolution } from '../domain';
import { workItemId, type ControlActivities, type FleetView, type LoopResolution, type LoopResolutionResult } from '../contract';

const work = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '1m',
  retry: { initialInterval: '1s', maximumInterval: '10s', maximumAttempts: 3 },
});

/** What the fleet knows of its items: those it tells, and whether this run chain has looked up an earlier run's. */
export interface FleetItems {
  known: string[];
  discovered: boolean;
}

/** Tells the items what the last look found; an item that cannot be told now is told after the next look. */
export async function reportFleetWork(view: FleetView, items: FleetItems): Promise<FleetItems> {
  try {
    const known = items.discovered ? items.known : [...new Set([...items.known, ...(await work.openFleetItems())])];
    const { reports, known: next } = fleetWork(view, known);
    if (reports.length > 0) await work.reportFleetWork.executeWithOptions({ summary: 'report to the work items' }, [{ reports }]);
    return { known: next, discovered: true };
  } catch (error) {
    log.warn('the fleet did not tell its work items; the next look tells them', { error: String(error) });
    return items;
  }
}

/**
 * A resolution the fleet takes (its resolveWork Update's validator and handler): `hold`, of a
 * fleet condition the fleet holds open now for the item's node. Anything else is refused.
 */
export function judgeFleetResolution(view: FleetView, payload: unknown): LoopResolution {
  const parsed = parseLoopResolution(payload);
  if (!parsed.ok) throw new Error(parsed.error);
  const r = parsed.value;
  if (!FLEET_WORK_CONDITIONS.includes(r.condition))
    throw new Error(`resolveWork rejected: ${r.condition} is a loop's condition, not the fleet's`);
  const open = view.conditions.find((c) => c.type === r.condition && workItemId(c.node, c.type, null) === r.item_id);
  if (!open) throw new Error(`resolveWork rejected: the fleet holds no open ${r.condition} for ${r.item_id}`);
  if (r.resolution !== 'hold')
    throw new Error(`resolveWork rejected: ${r.condition} takes hold only; ${r.resolution} is not one of its resolutions`);
  return r;
}

/** What the fleet answers a resolution it took: no ledger entry (the fleet keeps none), the look it was judged on. */
export const fleetResolved = (view: FleetView): LoopResolutionResult => ({ entry: null, seq: view.looks });
