import {
  ApplicationFailure,
  condition,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  claimRefusal,
  claimWork,
  itemSummary,
  nextDeadline,
  parseClaim,
  parseRelease,
  parseResolve,
  releaseRefusal,
  resolveRefusal,
  tickWork,
  unclaim,
  workEpisode,
  type CheckedResolve,
} from '../domain';
import {
  DatumStatus,
  MEMO_SUMMARY,
  claimWorkUpdate,
  releaseWorkUpdate,
  resolveWorkUpdate,
  workItemQuery,
  type ResolveResult,
  type WorkItem,
} from '../contract';
import { summaryLine } from './summaries';
import { requester, thisUpdate } from './update-identity';

/*
 * What the work items no loop opens share with every other (docs/work-items.md): the `item`
 * query, claims under a lease, escalation, and a resolve Update judged by its validator (a
 * refused one records nothing). What a resolution does is the workflow's own (`carryOut`): a
 * halted rollout's item hands it to its rollout, a planned removal's asks the node's agent.
 */

export interface HeldItem {
  item: WorkItem;
  /** A resolution is being carried out: no other is judged meanwhile. */
  resolving: boolean;
  escalateMs: number;
  /** The state and summary last published (search attribute, memo). */
  shown: { state: string | null; summary: string | null };
  /** The first run of the chain: the episode's run_id. */
  runId: string;
  /** Extra words for the item's page in the Web UI. */
  details: (item: WorkItem) => string[];
}

/** Carries out a resolution the validator accepted; throws (an ApplicationFailure) to refuse it, leaving the item as it was. */
export type CarryOut = (r: CheckedResolve, identity: string | null) => Promise<void>;

export function holdItem(item: WorkItem, escalateMs: number, details: HeldItem['details']): HeldItem {
  const h: HeldItem = {
    item,
    resolving: false,
    escalateMs,
    shown: { state: null, summary: null },
    runId: workflowInfo().firstExecutionRunId,
    details,
  };
  publish(h);
  return h;
}

const refuseIf = (reason: string | null) => {
  if (reason) throw new Error(reason);
};

const nowIso = () => new Date(Date.now()).toISOString();

export function installItemHandlers(h: HeldItem, carryOut: CarryOut): void {
  setHandler(workItemQuery, () => h.item);
  setHandler(
    claimWorkUpdate,
    async (payload) => {
      const parsed = parseClaim(payload);
      if (!parsed.ok) throw ApplicationFailure.nonRetryable(parsed.error, 'InvalidPayload');
      const at = nowIso();
      h.item = claimWork(h.item, parsed.value, null, at, workEpisode(h.item, h.runId));
      publish(h);
      const identity = await requester(thisUpdate());
      if (h.item.claim?.at === at && h.item.claim.by === parsed.value.by)
        h.item = { ...h.item, claim: { ...h.item.claim, identity } };
      return h.item;
    },
    {
      validator: (payload) => {
        const parsed = parseClaim(payload);
        if (!parsed.ok) throw new Error(parsed.error);
        refuseIf(h.resolving ? 'claim refused: a resolution is being carried out right now' : null);
        refuseIf(claimRefusal(h.item, parsed.value.by, nowIso()));
      },
    },
  );
  setHandler(
    releaseWorkUpdate,
    (payload) => {
      const parsed = parseRelease(payload);
      if (parsed.ok && h.item.claim?.by === parsed.value.by) h.item = unclaim(h.item);
      publish(h);
      return h.item;
    },
    {
      validator: (payload) => {
        const parsed = parseRelease(payload);
        if (!parsed.ok) throw new Error(parsed.error);
        refuseIf(releaseRefusal(h.item, parsed.value.by, nowIso()));
      },
    },
  );
  setHandler(resolveWorkUpdate, (payload) => resolve(h, payload, carryOut), {
    validator: (payload) => {
      const parsed = parseResolve(payload);
      if (!parsed.ok) throw new Error(parsed.error);
      refuseIf(h.resolving ? 'resolve refused: another resolution is being carried out right now' : null);
      refuseIf(resolveRefusal(h.item, parsed.value, nowIso(), workEpisode(h.item, h.runId)));
    },
  });
}

async function resolve(h: HeldItem, payload: unknown, carryOut: CarryOut): Promise<ResolveResult> {
  const parsed = parseResolve(payload);
  if (!parsed.ok) throw ApplicationFailure.nonRetryable(parsed.error, 'InvalidPayload');
  h.resolving = true;
  try {
    const identity = await requester(thisUpdate());
    await carryOut(parsed.value, identity);
    return { item: h.item, entry: null };
  } finally {
    h.resolving = false;
    publish(h);
  }
}

/** Until the item closes: leases end and an unclaimed item escalates on the way. */
export async function holdUntilClosed(h: HeldItem): Promise<void> {
  while (h.item.state !== 'CLOSED') {
    const deadline = nextDeadline(h.item, h.escalateMs);
    const changed = () => h.item.state === 'CLOSED' || nextDeadline(h.item, h.escalateMs) !== deadline;
    if (deadline === null) await condition(changed);
    else {
      const summary = h.item.claim ? `claim by ${h.item.claim.by} ends` : 'escalate if still unclaimed';
      await condition(changed, Math.max(0, Date.parse(deadline) - Date.now()), { summary: summaryLine(summary) });
    }
    if (!h.resolving) h.item = tickWork(h.item, nowIso(), h.escalateMs);
    publish(h);
  }
}

/** State as a search attribute, the one-line summary as the memo, the item as the page's details; only what changed. */
export function publish(h: HeldItem): void {
  h.item = { ...h.item, episode: workEpisode(h.item, h.runId) };
  const summary = itemSummary(h.item);
  if (h.shown.state !== h.item.state) {
    upsertSearchAttributes([{ key: DatumStatus, value: h.item.state }]);
    h.shown.state = h.item.state;
  }
  if (h.shown.summary !== summary) {
    upsertMemo({ [MEMO_SUMMARY]: summary });
    h.shown.summary = summary;
  }
  const item = h.item;
  const choices = item.allowed.map((a) => `- **${a.resolution}**: ${a.does}${a.refused ? ` _Refused here: ${a.refused}_` : ''}`);
  setCurrentDetails(
    [
      `**${item.state}** ${item.condition} ${item.resource_key ?? ''} of **${item.node}**`,
      '',
      item.message,
      '',
      ...h.details(item),
      '',
      ...choices,
      '',
      `\`datum work show ${item.id}\` · \`datum work resolve ${item.id} --resolution R --by NAME\``,
    ].join('\n'),
  );
}
