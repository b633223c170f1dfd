import { CONDITION_TYPES, STATUSES } from '../../domain';
import { listFlag, oneOf, outputFormat, wholeFlag, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import {
  checkFleet,
  endWords,
  FLEET_CONDITION_TYPES,
  fleetFor,
  NO_RUNNING_LOOP,
  UNCHECKED,
  type NodeWithoutLoop,
} from '../fleet-view';
import { listNodes, type NodeFilter, type NodeRow } from '../nodes';
import { ago, print, printDocument, printLine, table } from '../output';
import type { CommandModule } from '../command';
import { nodeMatcher, selectorFlag } from '../selectors';
import type { Selector } from '../../domain/selector';

interface NodesRaw extends ConnectionFlags, OutputFlags {
  status?: string;
  condition?: string;
  generation?: string;
  fleet?: string;
  selector?: string;
}

export interface NodesInput {
  values: NodesRaw;
  format: OutputFormat;
  filter: NodeFilter;
  /** --selector: only the nodes it selects (by name, or by the authority's labels). */
  selector: Selector | null;
  /** The authority whose nodes without a running loop are listed too; null: running loops only. */
  fleetDir: string | null;
}

/** --status, --condition and --generation, checked against the closed sets before they go into a query. */
export function nodeFilterOf(values: { status?: string; condition?: string; generation?: string }): NodeFilter {
  return {
    statuses: oneOf(listFlag(values.status), STATUSES, '--status'),
    conditions: oneOf(listFlag(values.condition), [...CONDITION_TYPES, ...FLEET_CONDITION_TYPES], '--condition'),
    ...(values.generation !== undefined ? { generation: wholeFlag(values.generation, '--generation', '12') } : {}),
  };
}

export const nodesCommand: CommandModule<NodesRaw, NodesInput> = {
  input(values) {
    const filter = nodeFilterOf(values);
    const fleetDir = fleetFor(filter.conditions ?? [], values.fleet, values);
    return { values, format: outputFormat(values), filter, fleetDir, selector: selectorFlag(values.selector) };
  },
  async run({ values, format, filter, fleetDir, selector }) {
    return await withTemporal(values, async (client) => {
      const selected = await nodeMatcher(selector, fleetDir);
      const rows = (await listNodes(client, filter)).filter((r) => selected(r.node));
      const without = (await withoutLoop(client, filter, fleetDir)).filter((w) => selected(w.node));
      if (format === 'json') printDocument('json', { nodes: rows, without_loop: without });
      else if (format === 'jsonl') {
        for (const r of rows) printLine(r);
        for (const w of without) printLine({ without_loop: true, ...w });
      } else {
        print(rows.length + without.length === 0 ? noneLine(filter) : nodesTable(rows, without));
        if (fleetDir === null) print(UNCHECKED);
      }
      return 0;
    });
  },
};

/**
 * The authority's nodes that have no running loop, as far as the filter lets them in: they have
 * no status, their one condition is NO_RUNNING_LOOP, and their generation is the authority's.
 */
async function withoutLoop(
  client: Parameters<typeof listNodes>[0],
  filter: NodeFilter,
  fleetDir: string | null,
): Promise<NodeWithoutLoop[]> {
  if (fleetDir === null || filter.statuses?.length) return [];
  if (filter.conditions?.length && !filter.conditions.includes(NO_RUNNING_LOOP)) return [];
  // Every running loop, whatever the filter: a node filtered out still has its loop.
  const running = await listNodes(client);
  const { without_loop } = await checkFleet(client, fleetDir, new Set(running.map((r) => r.node)));
  return without_loop.filter((w) => filter.generation === undefined || w.desired_generation === filter.generation);
}

function noneLine(filter: NodeFilter): string {
  const filtered = filter.statuses?.length || filter.conditions?.length || filter.generation !== undefined;
  return filtered
    ? 'No running reconcile loop matches these filters.'
    : 'No running reconcile loop: start one with `datum rollout start --generation G --all`.';
}

export function nodesTable(rows: NodeRow[], without: NodeWithoutLoop[] = [], now = Date.now()): string {
  const lines = [
    ...rows.map((r) => [
      r.node,
      r.status ?? '-',
      r.reason ?? '-',
      String(r.generation),
      r.mode ?? '-',
      r.conditions.join(',') || '-',
      ago(r.last_verified_at, now),
      age(r.since, now),
    ]),
    // No loop, so no status: what the row says is how the last loop ended, and since when.
    ...without.map((w) => [
      w.node,
      'NO LOOP',
      endWords(w),
      w.desired_generation === null ? '-' : String(w.desired_generation),
      '-',
      NO_RUNNING_LOOP,
      '-',
      age(w.since, now),
    ]),
  ];
  return table(
    ['NODE', 'STATUS', 'REASON', 'GEN', 'MODE', 'CONDITIONS', 'LAST VERIFIED', 'AGE'],
    lines.sort((a, b) => a[0].localeCompare(b[0])),
  );
}

/** kubectl's AGE: 45s, 12m, 3h, 5d. */
export function age(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 120 * 60) return `${Math.round(s / 60)}m`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}
