import {
  allHandlersFinished,
  condition,
  continueAsNew,
  log,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { durationMs, fleetWorkWaiting, mergeFleetConditions, withDecisions } from '../domain';
import {
  DatumConditions,
  MAX_HISTORY_EVENTS,
  MEMO_INTERVAL,
  MEMO_LOOKED_AT,
  MEMO_SUMMARY,
  fleetLookSignal,
  fleetViewQuery,
  loopResolveWorkUpdate,
  type ControlActivities,
  type FleetCarry,
  type FleetInput,
  type FleetView,
  type FleetWorkflow,
} from '../contract';
import { fleetResolved, judgeFleetResolution, reportFleetWork, type FleetItems } from './fleet-work';
import { summaryLine } from './summaries';

/**
 * The fleet's own view (docs/architecture.md §3, "The fleet workflow"): every interval one look
 * (a local activity) compares the authority's nodes with the loops; the conditions it finds are
 * held here, opened and closed by what the next look sees, never by a signal. Each look moves the
 * memo's looked_at, so `datum status` can tell a watched fleet from one nobody looks at even when
 * no worker is left to answer a query. The judgement is src/domain/fleet.ts; this is the wiring.
 */
export const fleet: FleetWorkflow = async (input) => {
  const f = openFleet(input);
  for (;;) {
    await look(f);
    await condition(() => f.lookNow, durationMs(f.view.interval), { summary: 'next look' });
    f.lookNow = false;
    await continueAsNewIfDue(f);
  }
};

interface Fleet {
  view: FleetView;
  fingerprint: string | null;
  items: FleetItems;
  /** The conditions changed since the items were last told (or telling them failed). */
  tellItems: boolean;
  lookNow: boolean;
  /** The condition types and summary last published. */
  shown: { types: string | null; summary: string | null };
}

const lookAt = proxyLocalActivities<ControlActivities>({
  // A look over thousands of nodes is a few visibility pages and a stat per file: seconds.
  startToCloseTimeout: '2m',
  retry: { initialInterval: '1s', maximumInterval: '10s', maximumAttempts: 3 },
});

function openFleet(input: FleetInput): Fleet {
  const info = workflowInfo();
  // Only this workflow's own continue-as-new carries a view: a carry from anyone else could hide conditions.
  const carry: FleetCarry | null = input.carry && info.continuedFromExecutionRunId !== undefined ? input.carry : null;
  const view: FleetView = carry?.view
    ? { ...carry.view, interval: input.interval }
    : {
        workflow_id: info.workflowId,
        task_queue: info.taskQueue,
        interval: input.interval,
        looked_at: null,
        looks: 0,
        counts: null,
        authority: null,
        conditions: [],
        decisions: {},
      };
  const f: Fleet = {
    view,
    fingerprint: carry?.fingerprint ?? null,
    // A new chain looks up the items an earlier fleet run opened before it tells any.
    items: { known: carry?.work ?? [], discovered: carry !== null },
    tellItems: carry === null,
    lookNow: false,
    shown: { types: null, summary: null },
  };
  setHandler(fleetViewQuery, () => f.view);
  setHandler(fleetLookSignal, () => void (f.lookNow = true));
  setHandler(loopResolveWorkUpdate, (payload) => hold(f, judgeFleetResolution(f.view, payload)), {
    validator: (payload) => void judgeFleetResolution(f.view, payload),
  });
  return f;
}

/** A resolver's hold of a fleet condition: recorded on the condition until a look no longer finds it. */
function hold(f: Fleet, r: ReturnType<typeof judgeFleetResolution>) {
  const at = new Date(Date.now()).toISOString();
  const decided = `${r.resolution} by ${r.by}${r.identity ? ` (${r.identity})` : ''} at ${at}${r.note ? `: ${r.note}` : ''}`;
  const shown = withDecisions(f.view.conditions, { ...f.view.decisions, [r.item_id]: decided });
  f.view = { ...f.view, ...shown };
  return fleetResolved(f.view);
}

/** One look: the view it finds, published; the work items of the conditions that need judgement told. */
async function look(f: Fleet): Promise<void> {
  let seen;
  try {
    seen = await lookAt.lookAtFleet.executeWithOptions({ summary: 'look at the fleet' }, [{ known: f.fingerprint }]);
  } catch (error) {
    // The view stays as it was and looked_at does not move: after the grace, the fleet reads as unwatched.
    log.warn('the fleet look failed; the next interval tries again', { error: String(error) });
    return;
  }
  const lookedAt = new Date(Date.now()).toISOString();
  if (seen.conditions !== null) {
    const merged = withDecisions(mergeFleetConditions(f.view.conditions, seen.conditions, lookedAt), f.view.decisions);
    f.view = { ...f.view, ...merged };
    f.tellItems = true;
  }
  f.fingerprint = seen.fingerprint;
  f.view = { ...f.view, looked_at: lookedAt, looks: f.view.looks + 1, counts: seen.counts, authority: seen.authority };
  publish(f);
  if (!f.tellItems && !fleetWorkWaiting(f.view, f.items.known)) return;
  const told = await reportFleetWork(f.view, f.items);
  f.tellItems = told === f.items;
  f.items = told;
}

/** The memo's looked_at every look (one event); the condition types and the summary only when they change. */
function publish(f: Fleet): void {
  const { view } = f;
  const types = [...new Set(view.conditions.map((c) => c.type))].sort();
  if (JSON.stringify(types) !== f.shown.types) {
    upsertSearchAttributes([{ key: DatumConditions, value: types }]);
    f.shown.types = JSON.stringify(types);
  }
  const c = view.counts;
  const summary = summaryLine(
    c
      ? `${view.conditions.length} fleet condition(s); ${c.verified} of ${c.declared} declared node(s) verified within their bound, ${c.loops} loop(s)`
      : 'not looked yet',
  );
  upsertMemo({
    [MEMO_LOOKED_AT]: view.looked_at,
    [MEMO_INTERVAL]: view.interval,
    ...(summary !== f.shown.summary ? { [MEMO_SUMMARY]: summary } : {}),
  });
  f.shown.summary = summary;
  setCurrentDetails(details(view, summary));
}

function details(view: FleetView, summary: string): string {
  const rows = view.conditions.slice(0, 50).map((c) => `- **${c.node}** ${c.type}: ${c.message}`);
  const more =
    view.conditions.length > rows.length ? [`- … and ${view.conditions.length - rows.length} more (\`datum status\`)`] : [];
  return [`Looked at ${view.looked_at} (every ${view.interval}). ${summary}`, '', ...rows, ...more].join('\n');
}

async function continueAsNewIfDue(f: Fleet): Promise<void> {
  const info = workflowInfo();
  if (!(info.continueAsNewSuggested || info.historyLength > MAX_HISTORY_EVENTS) || f.lookNow) return;
  await condition(allHandlersFinished);
  await continueAsNew<FleetWorkflow>({
    interval: f.view.interval,
    carry: { view: f.view, fingerprint: f.fingerprint, work: f.items.known },
  });
}
