import type { Client } from '@temporalio/client';
import { CONDITION_TYPES } from '../../domain';
import { durationFlag, listFlag, oneOf, outputFormat, UsageError, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { EXIT, withFix } from '../errors';
import { FLEET_CONDITION_TYPES, fleetOverride, readFleet, unwatchedLine, type FleetReading, type Watch } from '../fleet-view';
import { handleOf, listNodes, mapLimit, stateOf, type NodeRow } from '../nodes';
import { ago, print, printDocument, printLine, short, table } from '../output';
import { untilStopped } from '../process';
import type { CommandModule } from '../command';
import { nodeMatcher, selectorFlag } from '../selectors';
import type { Selector } from '../../domain/selector';

export interface OpenCondition {
  node: string;
  /** The loop that reports it; for NO_RUNNING_LOOP the node's last loop, null when none ever ran. */
  workflow_id: string | null;
  type: string;
  resource_key: string | null;
  since: string;
  message: string;
  evidence: unknown;
  tried: string[];
  resolver: string;
  needs_judgement: boolean;
}

interface StatusRaw extends ConnectionFlags, OutputFlags {
  condition?: string;
  fleet?: string;
  selector?: string;
  watch?: boolean;
  interval?: string;
}

export interface StatusInput {
  values: StatusRaw;
  format: OutputFormat;
  conditions: string[];
  /** The fleet directory to look at instead of reading the fleet workflow's view (--fleet, DATUM_FLEET). */
  fleetDir: string | null;
  /** --selector: only the conditions of the nodes it selects. */
  selector: Selector | null;
  /** --watch: every this many ms until Ctrl-C; null: once. */
  watchMs: number | null;
}

export interface Report {
  /** Nodes with a running loop. */
  nodes: number;
  /** Nodes the authority declares, as the fleet's view last counted them; null when it cannot be read. */
  declared: number | null;
  /** Declared nodes whose loop verified them within their bound. */
  verified: number | null;
  /** The fleet directory looked at, null when the view is the fleet workflow's. */
  fleet: string | null;
  watch: Watch;
  conditions: OpenCondition[];
  unreadable: Array<{ node: string; error: string }>;
}

/**
 * The fleet's view (the fleet workflow's, or --fleet DIR's) gives the fleet's conditions and
 * whether anyone watches; visibility lists the running loops and says which have an open
 * condition (DatumConditions); only those are asked for the details, so a fleet of 1000 right
 * nodes costs one list, not 1000 queries. With no controller to answer a query, the loops'
 * conditions are told from visibility alone.
 */
export async function statusReport(client: Client, types: string[], fleetDir: string | null): Promise<Report> {
  const wanted = (type: string) => types.length === 0 || types.includes(type);
  const [fleet, running] = await Promise.all([readFleet(client, fleetDir), listNodes(client)]);
  const conditions: OpenCondition[] = fleet.conditions.filter((c) => wanted(c.type));
  const unreadable: Report['unreadable'] = [];
  const flagged = running.filter((r) => r.conditions.some(wanted));
  await mapLimit(flagged, 32, async (row) => {
    if (fleet.watch.controllers === 0) return void conditions.push(...fromVisibility(row, wanted));
    try {
      const state = await stateOf(handleOf(client, row));
      for (const c of state.conditions)
        if (wanted(c.type)) conditions.push({ node: row.node, workflow_id: row.workflow_id, ...c });
    } catch (error) {
      unreadable.push({ node: row.node, error: (error as Error).message });
    }
  });
  conditions.sort(
    (a, b) =>
      a.node.localeCompare(b.node) || a.type.localeCompare(b.type) || (a.resource_key ?? '').localeCompare(b.resource_key ?? ''),
  );
  unreadable.sort((a, b) => a.node.localeCompare(b.node));
  return reportOf(running.length, fleet, conditions, unreadable);
}

function reportOf(nodes: number, fleet: FleetReading, conditions: OpenCondition[], unreadable: Report['unreadable']): Report {
  return {
    nodes,
    declared: fleet.counts?.declared ?? null,
    verified: fleet.counts?.verified ?? null,
    fleet: fleet.fleet,
    watch: fleet.watch,
    conditions,
    unreadable,
  };
}

/** A loop's conditions as visibility shows them (type only, the memo's summary) when no controller can answer a query. */
function fromVisibility(row: NodeRow, wanted: (type: string) => boolean): OpenCondition[] {
  return row.conditions.filter(wanted).map((type) => ({
    node: row.node,
    workflow_id: row.workflow_id,
    type,
    resource_key: null,
    since: row.since,
    message: `(no controller answers for the details) ${row.summary ?? ''}`.trim(),
    evidence: null,
    tried: [],
    resolver: '-',
    needs_judgement: false,
  }));
}

/** 3 when nobody watches the fleet, 1 when something is open or not known to be right, else 0. */
export function exitOf(r: Report, filtered: boolean): number {
  if (!r.watch.watched) return EXIT.unwatched;
  if (r.conditions.length > 0 || r.unreadable.length > 0) return EXIT.finding;
  return filtered || r.verified === r.declared ? EXIT.ok : EXIT.finding;
}

export const statusCommand: CommandModule<StatusRaw, StatusInput> = {
  input(values) {
    const conditions = oneOf(listFlag(values.condition), [...CONDITION_TYPES, ...FLEET_CONDITION_TYPES], '--condition');
    return {
      values,
      format: outputFormat(values),
      conditions,
      fleetDir: fleetOverride(values.fleet),
      watchMs: values.watch ? watchInterval(values.interval) : null,
      selector: selectorFlag(values.selector),
    };
  },
  async run({ values, format, conditions: types, fleetDir, watchMs, selector }) {
    return await withTemporal(values, async (client) => {
      const selected = await nodeMatcher(selector, fleetDir);
      const look = async () => onlySelected(await statusReport(client, types, fleetDir), selector === null ? null : selected);
      if (watchMs !== null) return watchStatus(watchMs, look, format, types);
      const report = await look();
      if (format === 'json') printDocument('json', report);
      else if (format === 'jsonl') {
        for (const c of report.conditions) printLine(c);
        for (const u of report.unreadable) printLine({ unreadable: true, ...u });
        if (!report.watch.watched) printLine({ unwatched: true, ...report.watch });
      } else print(reportText(report, types, selector?.text ?? null));
      return exitOf(report, types.length > 0 || selector !== null);
    });
  },
};

/** The report cut to the nodes --selector selects; the whole report when there is none. */
function onlySelected(r: Report, selected: ((node: string) => boolean) | null): Report {
  if (selected === null) return r;
  return {
    ...r,
    conditions: r.conditions.filter((c) => selected(c.node)),
    unreadable: r.unreadable.filter((u) => selected(u.node)),
  };
}

/** The report as a person reads it. */
export function reportText(r: Report, types: string[], selector: string | null = null): string {
  const lines: string[] = [];
  if (!r.watch.watched) lines.push(unwatchedLine(r.watch), '');
  const of = r.declared === null ? `${r.nodes} running loop(s)` : `${Math.max(r.declared, r.nodes)} node(s)`;
  if (r.conditions.length === 0 && r.unreadable.length === 0) {
    lines.push(selector === null ? rightLine(r, types, of) : `No open condition on the nodes --selector ${selector} selects.`);
    return lines.join('\n');
  }
  if (r.conditions.length > 0)
    lines.push(
      table(
        ['NODE', 'CONDITION', 'RESOURCE', 'SINCE', 'RESOLVER', 'WHAT IS WRONG', 'TRIED'],
        r.conditions.map((c) => [
          c.node,
          c.type,
          c.resource_key ?? '-',
          ago(c.since),
          `${c.resolver}${c.needs_judgement ? ' (judgement)' : ''}`,
          c.message,
          short(c.tried.join('; ') || '-', 50),
        ]),
      ),
    );
  for (const u of r.unreadable) lines.push(`${u.node}: state unreadable (${u.error})`);
  lines.push(
    `\n${r.conditions.length} open condition(s) on ${new Set(r.conditions.map((c) => c.node)).size} of ${of}. \`datum describe NODE\` explains one.`,
  );
  return lines.join('\n');
}

/** "The fleet is right" only when nothing was left out: no filter, watched, and every declared node verified recently. */
function rightLine(r: Report, types: string[], of: string): string {
  if (types.length > 0) return `No open ${types.join(' or ')} condition across ${of}.`;
  if (!r.watch.watched) return `No open condition seen across ${of}, but nobody watches the fleet: it is not known to be right.`;
  if (r.verified !== r.declared)
    return `No open conditions across ${of}, but ${(r.declared ?? 0) - (r.verified ?? 0)} declared node(s) not verified within their bound yet: the fleet is not known to be right.`;
  return `No open conditions across ${of}, each verified within its bound: the fleet is right.`;
}

/** --interval for --watch: how long between looks, default 2s. */
function watchInterval(raw: string | undefined): number {
  if (raw === undefined) return 2000;
  const ms = durationFlag(raw, '--interval');
  if (ms < 500) throw new UsageError(withFix(`--interval ${raw} is shorter than 500ms`, 'such as --interval 5s'));
  return ms;
}

// ---------------------------------------------------------------------------------------------
// --watch: the report once, then each condition as it opens or closes and each change of who
// watches the fleet, one line each, until Ctrl-C.

type WatchEvent =
  | { event: 'opened' | 'closed'; condition: OpenCondition }
  | { event: 'unwatched' | 'watched'; watch: Watch }
  | { event: 'error'; error: string };

const conditionKey = (c: OpenCondition) => `${c.node}\u0000${c.type}\u0000${c.resource_key ?? ''}`;

/** What changed from one report to the next. */
export function changes(before: Report | null, after: Report): WatchEvent[] {
  if (before === null) return [];
  const was = new Map(before.conditions.map((c) => [conditionKey(c), c]));
  const now = new Map(after.conditions.map((c) => [conditionKey(c), c]));
  const events: WatchEvent[] = [];
  if (before.watch.watched !== after.watch.watched)
    events.push({ event: after.watch.watched ? 'watched' : 'unwatched', watch: after.watch });
  for (const [key, c] of now) if (!was.has(key)) events.push({ event: 'opened', condition: c });
  for (const [key, c] of was) if (!now.has(key)) events.push({ event: 'closed', condition: c });
  return events;
}

function eventLine(at: string, e: WatchEvent): string {
  if ('error' in e) return `${at}  ERROR     ${e.error}`;
  if ('watch' in e)
    return e.event === 'unwatched'
      ? `${at}  ${unwatchedLine(e.watch)}`
      : `${at}  WATCHED   the fleet was looked at ${e.watch.looked_at ?? ''} again`;
  const c = e.condition;
  const what = `${c.node} ${c.type}${c.resource_key ? ` ${c.resource_key}` : ''}`;
  return e.event === 'opened' ? `${at}  OPENED    ${what}: ${c.message}` : `${at}  CLOSED    ${what}`;
}

async function watchStatus(everyMs: number, read: () => Promise<Report>, format: OutputFormat, types: string[]): Promise<number> {
  const run = untilStopped();
  const show = (e: WatchEvent) => {
    const at = new Date().toISOString();
    if (format === 'text') print(eventLine(at, e));
    else printLine({ at, ...e });
  };
  let last: Report | null = null;
  let code: number = EXIT.ok;
  while (!run.stopped()) {
    try {
      const report = await read();
      if (last === null && format === 'text')
        print(`${reportText(report, types)}\n\nWatching every ${everyMs / 1000}s; Ctrl-C stops.`);
      if (last === null && format !== 'text') printLine({ at: new Date().toISOString(), event: 'report', ...report });
      for (const e of changes(last, report)) show(e);
      last = report;
      code = exitOf(report, types.length > 0);
    } catch (error) {
      show({ event: 'error', error: (error as Error).message });
    }
    await run.sleep(everyMs);
  }
  return code;
}
