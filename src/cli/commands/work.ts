import {
  WORK_STATES,
  claimWorkUpdate,
  releaseWorkUpdate,
  resolveWorkUpdate,
  type ResolvePayload,
  type WorkItem,
} from '../../contract';
import { WORK_CONDITIONS, parseClaim, parseRelease, parseResolve, type CheckedResolve } from '../../domain';
import { UsageError, durationFlag, listFlag, oneOf, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { checkNode } from '../nodes';
import { ago, oneLine, print, printDocument, printLine, short, table } from '../output';
import type { CommandModule } from '../command';
import {
  checkItemId,
  listWork,
  readItem,
  sendWorkUpdate,
  type WorkFilter,
  episodeToken,
  parseEpisodeToken,
  readItemRun,
} from '../work';

/*
 * `datum work`: the work items Datum hands over when it needs a judgement (docs/work-items.md).
 * list and show read; claim, release and resolve send the item's Updates, which its validator
 * refuses with the reason (and records nothing) or the item answers with what it became.
 */

interface ListRaw extends ConnectionFlags, OutputFlags {
  node?: string;
  condition?: string;
  state?: string;
}

export const workListCommand: CommandModule<ListRaw, { values: ListRaw; format: OutputFormat; filter: WorkFilter }> = {
  input(values) {
    const filter: WorkFilter = {
      nodes: listFlag(values.node).map(checkNode),
      conditions: oneOf(listFlag(values.condition), WORK_CONDITIONS, '--condition'),
      states: oneOf(listFlag(values.state), WORK_STATES, '--state'),
    };
    return { values, format: outputFormat(values), filter };
  },
  async run({ values, format, filter }) {
    return await withTemporal(values, async (client) => {
      const rows = await listWork(client, filter);
      if (format === 'json') printDocument('json', { items: rows });
      else if (format === 'jsonl') for (const r of rows) printLine(r);
      else if (rows.length === 0) print('No open work items: nothing waits for a judgement.');
      else {
        print(
          table(
            ['ITEM', 'STATE', 'OPENED', 'SUMMARY'],
            rows.map((r) => [r.id, r.state, ago(r.opened_at), short(r.summary ?? '-', 100)]),
          ),
        );
        print(`\n${rows.length} open work item(s). \`datum work show ITEM\` says what is known and how to resolve it.`);
      }
      return 0;
    });
  },
};

interface ItemRaw extends ConnectionFlags, OutputFlags {
  item: string;
}

export const workShowCommand: CommandModule<ItemRaw, { values: ItemRaw; id: string; format: OutputFormat }> = {
  input(values) {
    return { values, id: checkItemId(values.item), format: outputFormat(values) };
  },
  async run({ values, id, format }) {
    return await withTemporal(values, async (client) => {
      const item = await readItem(client, id);
      if (format !== 'text') printDocument(format, item);
      else printItem(item);
      return 0;
    });
  },
};

export function printItem(item: WorkItem): void {
  const claim = item.claim
    ? `claimed by ${item.claim.by}${item.claim.identity ? ` (${item.claim.identity})` : ''} until ${item.claim.until}`
    : 'unclaimed';
  print(`${item.id}  ${item.state}  (${claim})`);
  print(
    `${item.condition}${item.resource_key ? ` on "${item.resource_key}"` : ''} of ${item.node}, since ${item.since}; resolver: ${item.resolver}`,
  );
  print(`  ${oneLine(item.message)}`);
  print(`  loop ${item.loop} at generation ${item.target.generation}, mode ${item.mode ?? '-'}`);
  if (item.tried.length) print(`  tried: ${oneLine(item.tried.join('; '))}`);
  print(`  evidence: ${oneLine(short(item.evidence, 200))}`);
  if (item.episode) print(`  episode: ${episodeToken(item.episode)} (resolve --episode binds a resolution to it)`);
  if (item.dropped_reports) print(`  dropped: ${item.dropped_reports} report(s) its loop did not confirm`);
  print('\nResolutions:');
  for (const a of item.allowed)
    print(`  ${a.resolution.padEnd(8)} ${a.does}${a.refused ? `\n           refused here: ${a.refused}` : ''}`);
  if (item.resolutions.length) {
    print('\nGiven:');
    for (const r of item.resolutions)
      print(
        `  ${r.at} ${r.resolution} by ${oneLine(r.by)}${r.identity ? ` (${oneLine(r.identity)})` : ''}${r.note ? `: ${oneLine(r.note)}` : ''} → ${r.outcome ?? 'waiting for an observation'}`,
      );
  }
  print('\nLedger entries that led here:');
  for (const l of item.ledger)
    print(`  #${l.seq} ${l.decided_at} ${l.status}/${l.reason}: ${oneLine(short(l.reason_detail, 120))}`);
  if (item.closed) print(`\nClosed: ${oneLine(item.closed.detail)}`);
}

interface ClaimRaw extends ItemRaw {
  by?: string;
  lease?: string;
}

export const workClaimCommand: CommandModule<ClaimRaw, { values: ClaimRaw; id: string; format: OutputFormat }> = {
  input(values) {
    const parsed = parseClaim({ by: values.by, ...(values.lease ? { lease: values.lease } : {}) });
    if (!parsed.ok) throw new UsageError(parsed.error);
    return { values, id: checkItemId(values.item), format: outputFormat(values) };
  },
  async run({ values, id, format }) {
    return await withTemporal(values, async (client) => {
      const payload = { by: values.by!, ...(values.lease ? { lease: values.lease } : {}) };
      const item = await sendWorkUpdate(client, id, claimWorkUpdate, payload, 30_000);
      if (format !== 'text') printDocument(format, item);
      else {
        print(`${id}: claimed by ${item.claim?.by} until ${item.claim?.until}`);
        if (item.claim?.episode) print(`  episode ${episodeToken(item.claim.episode)}: a resolution is judged on it`);
      }
      return 0;
    });
  },
};

export const workReleaseCommand: CommandModule<ClaimRaw, { values: ClaimRaw; id: string; format: OutputFormat }> = {
  input(values) {
    const parsed = parseRelease({ by: values.by });
    if (!parsed.ok) throw new UsageError(parsed.error);
    return { values, id: checkItemId(values.item), format: outputFormat(values) };
  },
  async run({ values, id, format }) {
    return await withTemporal(values, async (client) => {
      const item = await sendWorkUpdate(client, id, releaseWorkUpdate, { by: values.by! }, 30_000);
      if (format !== 'text') printDocument(format, item);
      else print(`${id}: released; ${item.state}`);
      return 0;
    });
  },
};

interface ResolveRaw extends ItemRaw {
  episode?: string;
  resolution?: string;
  by?: string;
  note?: string;
  attempts?: string;
  timeout?: string;
}

interface ResolveInput {
  values: ResolveRaw;
  id: string;
  format: OutputFormat;
  resolve: CheckedResolve;
  timeoutMs: number;
}

export const workResolveCommand: CommandModule<ResolveRaw, ResolveInput> = {
  input(values) {
    const payload: Record<string, unknown> = { resolution: values.resolution, by: values.by };
    if (values.note !== undefined) payload.note = values.note;
    if (values.attempts !== undefined) payload.attempts = Number(values.attempts);
    if (values.episode !== undefined) payload.episode = parseEpisodeToken(values.episode);
    const parsed = parseResolve(payload);
    if (!parsed.ok) throw new UsageError(parsed.error);
    const timeoutMs = values.timeout === undefined ? 60_000 : durationFlag(values.timeout, '--timeout');
    return { values, id: checkItemId(values.item), format: outputFormat(values), resolve: parsed.value, timeoutMs };
  },
  async run({ values, id, format, resolve, timeoutMs }) {
    return await withTemporal(values, async (client) => {
      // Sent to the run read here, bound to the episode given, else to the one the resolver's own
      // claim covers, else to the one read here.
      const { item, runId } = await readItemRun(client, id);
      const claimed = item.claim?.by === resolve.by ? item.claim.episode : undefined;
      const judged = resolve.episode ?? claimed ?? item.episode ?? null;
      const result = await sendWorkUpdate(
        client,
        id,
        resolveWorkUpdate,
        payloadOf({ ...resolve, episode: judged }),
        timeoutMs,
        runId,
      );
      if (format !== 'text') printDocument(format, result);
      else {
        print(`${id}: ${result.item.state}`);
        if (result.entry) print(`  ledger #${result.entry.seq}: ${result.entry.reason_detail}`);
      }
      return 0;
    });
  },
};

export function payloadOf(r: CheckedResolve): ResolvePayload {
  return {
    resolution: r.resolution,
    by: r.by,
    ...(r.note !== null ? { note: r.note } : {}),
    ...(r.attempts !== null ? { attempts: r.attempts } : {}),
    ...(r.episode !== null ? { episode: r.episode } : {}),
  };
}
