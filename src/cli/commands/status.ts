import type { Client } from '@temporalio/client';
import { CONDITION_TYPES } from '../../domain';
import { listFlag, oneOf, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { handleOf, listNodes, mapLimit, nodeQuery, stateOf } from '../nodes';
import { ago, print, printDocument, printLine, short, table } from '../output';
import type { CommandModule } from '../command';

export interface OpenCondition {
  node: string;
  workflow_id: string;
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
}

export interface StatusInput {
  values: StatusRaw;
  format: OutputFormat;
  conditions: string[];
}

interface Report {
  nodes: number;
  conditions: OpenCondition[];
  unreadable: Array<{ node: string; error: string }>;
}

/**
 * Visibility says which loops have an open condition (DatumConditions, the same list call
 * `datum nodes` makes); only those are asked for the details: a fleet of 1000 right nodes costs
 * one list and one count, not 1000 queries.
 */
async function openConditions(client: Client, types: string[]): Promise<Report> {
  const [total, flagged] = await Promise.all([
    client.workflow.count(nodeQuery()),
    listNodes(client, types.length ? { conditions: types } : { withConditions: true }),
  ]);
  const conditions: OpenCondition[] = [];
  const unreadable: Report['unreadable'] = [];
  await mapLimit(flagged, 32, async (row) => {
    try {
      const state = await stateOf(handleOf(client, row));
      for (const c of state.conditions)
        if (types.length === 0 || types.includes(c.type)) conditions.push({ node: row.node, workflow_id: row.workflow_id, ...c });
    } catch (error) {
      unreadable.push({ node: row.node, error: (error as Error).message });
    }
  });
  conditions.sort(
    (a, b) =>
      a.node.localeCompare(b.node) || a.type.localeCompare(b.type) || (a.resource_key ?? '').localeCompare(b.resource_key ?? ''),
  );
  unreadable.sort((a, b) => a.node.localeCompare(b.node));
  return { nodes: total.count, conditions, unreadable };
}

export const statusCommand: CommandModule<StatusRaw, StatusInput> = {
  input(values) {
    return {
      values,
      format: outputFormat(values),
      conditions: oneOf(listFlag(values.condition), CONDITION_TYPES, '--condition'),
    };
  },
  async run({ values, format, conditions: types }) {
    return await withTemporal(values, async (client) => {
      const report = await openConditions(client, types);
      if (format === 'json') printDocument('json', report);
      else if (format === 'jsonl') {
        for (const c of report.conditions) printLine(c);
        for (const u of report.unreadable) printLine({ unreadable: true, ...u });
      } else printReport(report);
      return report.conditions.length === 0 && report.unreadable.length === 0 ? 0 : 1;
    });
  },
};

function printReport({ nodes, conditions, unreadable }: Report): void {
  if (conditions.length === 0 && unreadable.length === 0) {
    print(`No open conditions across ${nodes} node(s): the fleet is right.`);
    return;
  }
  if (conditions.length > 0)
    print(
      table(
        ['NODE', 'CONDITION', 'RESOURCE', 'SINCE', 'RESOLVER', 'WHAT IS WRONG', 'TRIED'],
        conditions.map((c) => [
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
  for (const u of unreadable) print(`${u.node}: state unreadable (${u.error})`);
  print(
    `\n${conditions.length} open condition(s) on ${new Set(conditions.map((c) => c.node)).size} of ${nodes} node(s). \`datum describe NODE\` explains one.`,
  );
}
