import { CONDITION_TYPES, STATUSES } from '../../domain';
import { listFlag, oneOf, outputFormat, wholeFlag, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { listNodes, type NodeFilter, type NodeRow } from '../nodes';
import { ago, print, printDocument, printLine, table } from '../output';
import type { CommandModule } from '../command';

interface NodesRaw extends ConnectionFlags, OutputFlags {
  status?: string;
  condition?: string;
  generation?: string;
}

export interface NodesInput {
  values: NodesRaw;
  format: OutputFormat;
  filter: NodeFilter;
}

/** --status, --condition and --generation, checked against the closed sets before they go into a query. */
export function nodeFilterOf(values: { status?: string; condition?: string; generation?: string }): NodeFilter {
  return {
    statuses: oneOf(listFlag(values.status), STATUSES, '--status'),
    conditions: oneOf(listFlag(values.condition), CONDITION_TYPES, '--condition'),
    ...(values.generation !== undefined ? { generation: wholeFlag(values.generation, '--generation', '12') } : {}),
  };
}

export const nodesCommand: CommandModule<NodesRaw, NodesInput> = {
  input(values) {
    return { values, format: outputFormat(values), filter: nodeFilterOf(values) };
  },
  async run({ values, format, filter }) {
    return await withTemporal(values, async (client) => {
      const rows = await listNodes(client, filter);
      if (format === 'json') printDocument('json', { nodes: rows });
      else if (format === 'jsonl') for (const r of rows) printLine(r);
      else print(rows.length === 0 ? noneLine(filter) : nodesTable(rows));
      return 0;
    });
  },
};

function noneLine(filter: NodeFilter): string {
  const filtered = filter.statuses?.length || filter.conditions?.length || filter.generation !== undefined;
  return filtered
    ? 'No running reconcile loop matches these filters.'
    : 'No running reconcile loop: start one with `datum rollout start --generation G --all`.';
}

export function nodesTable(rows: NodeRow[], now = Date.now()): string {
  return table(
    ['NODE', 'STATUS', 'REASON', 'GEN', 'MODE', 'CONDITIONS', 'LAST VERIFIED', 'AGE'],
    rows.map((r) => [
      r.node,
      r.status ?? '-',
      r.reason ?? '-',
      String(r.generation),
      r.mode ?? '-',
      r.conditions.join(',') || '-',
      ago(r.last_verified_at, now),
      age(r.since, now),
    ]),
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
