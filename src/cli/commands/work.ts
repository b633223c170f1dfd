import {
  WORK_STATES,
  withFix,
  claimWorkUpdate,
  releaseWorkUpdate,
  resolveWorkUpdate,
  type GateHalt,
  type RemovalPlan,
  type ResolvePayload,
  type WorkItem,
} from '../../contract';
import { WORK_KINDS, parseClaim, parseRelease, parseResolve, type CheckedResolve } from '../../domain';
import type { Selector } from '../../domain/selector';
import { fleetOverride } from '../fleet-view';
import { nodeMatcher, selectorFlag } from '../selectors';
import { UsageError, durationFlag, listFlag, oneOf, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { checkNode } from '../nodes';
import { itemStatement, signDecision } from '../operator-sign';
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
  selector?: string;
  fleet?: string;
}

interface ListInput {
  values: ListRaw;
  format: OutputFormat;
  filter: WorkFilter;
  /** --selector: only the items of the nodes it selects (a halted rollout's item is about no one node). */
  selector: Selector | null;
}

export const workListCommand: CommandModule<ListRaw, ListInput> = {
  input(values) {
    const filter: WorkFilter = {
      nodes: listFlag(values.node).map(checkNode),
      conditions: oneOf(listFlag(values.condition), WORK_KINDS, '--condition'),
      states: oneOf(listFlag(values.state), WORK_STATES, '--state'),
    };
    return { values, format: outputFormat(values), filter, selector: selectorFlag(values.selector) };
  },
  async run({ values, format, filter, selector }) {
    return await withTemporal(values, async (client) => {
      const selected = await nodeMatcher(selector, selector ? fleetOverride(values.fleet) : null);
      const rows = (await listWork(client, filter)).filter(
        (r) => !selector || (r.condition !== 'ROLLOUT_HALTED' && selected(r.node)),
      );
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
  if (item.removal) printRemoval(item.removal);
  if (item.gate) printGate(item.gate);
  print('\nLedger entries that led here:');
  for (const l of item.ledger)
    print(
      `  ${l.node ? `${l.node} ` : ''}#${l.seq} ${l.decided_at} ${l.status}/${l.reason}: ${oneLine(short(l.reason_detail, 120))}`,
    );
  if (item.closed) print(`\nClosed: ${oneLine(item.closed.detail)}`);
}

/** Exactly what a planned removal would remove, each target as the agent read it, and what it did once approved. */
function printRemoval(plan: RemovalPlan): void {
  print(`\nWould remove (planned ${plan.planned_at}, the node at generation ${plan.generation ?? '-'}):`);
  if (plan.targets.length === 0) print('  nothing');
  for (const t of plan.targets)
    print(
      `  ${t.target.padEnd(32)} ${String(t.size).padStart(8)} bytes  sha256 ${t.sha256.slice(0, 16)}…  claimed by "${oneLine(t.resource_key)}" (generation ${t.claimed_generation ?? '?'})${t.refused ? `\n${' '.repeat(34)}refused here: ${oneLine(t.refused)}` : ''}`,
    );
  for (const k of plan.kept) print(`  left in place: ${k.target} (${oneLine(k.why)})`);
  if (plan.done) {
    print(
      `\nRemoved at ${plan.done.at}${plan.done.replayed ? " (answered from the agent's record)" : ''}, recorded in ${plan.done.record}:`,
    );
    for (const r of plan.done.removed) print(`  ${r.target} → ${r.backup}`);
  }
}

/** A halted rollout: the failing nodes, the waves that wait, and what a rollback would write. */
function printGate(g: GateHalt): void {
  print(`\nRollout ${g.rollout}, generation ${g.generation}, halted at ${g.wave_name}. Failing:`);
  for (const f of g.failing) print(`  ${f.node.padEnd(12)} ${f.state.padEnd(8)} ${oneLine(f.why ?? '')}`);
  print(`Not started: ${g.later_waves.map((w) => `${w.name} (${w.nodes.join(', ')})`).join('; ') || 'none'}`);
  print('A rollback would write:');
  for (const t of g.rollback)
    print(
      'error' in t
        ? `  ${t.node.padEnd(12)} nothing: ${oneLine(t.error)}`
        : `  ${t.node.padEnd(12)} generation ${t.to_generation} with the content of generation ${t.content_of} (${t.digest})`,
    );
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
  signKey?: string;
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
      // A closed item takes nothing more: a second approval of a removal removes nothing.
      if (item.state === 'CLOSED')
        throw new Error(withFix(`resolve refused: ${id} is closed: ${item.closed?.detail ?? ''}`, 'nothing more to do'));
      const claimed = item.claim?.by === resolve.by ? item.claim.episode : undefined;
      const judged = resolve.episode ?? claimed ?? item.episode ?? null;
      const operator =
        values.signKey === undefined
          ? null
          : await signDecision(values.signKey, itemStatement(item, resolve.resolution, resolve.by));
      const result = await sendWorkUpdate(
        client,
        id,
        resolveWorkUpdate,
        payloadOf({ ...resolve, episode: judged, operator }),
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
    ...(r.operator !== null ? { operator: r.operator } : {}),
  };
}
