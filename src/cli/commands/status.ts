import type { Client } from '@temporalio/client';
import { CONDITION_TYPES } from '../../domain';
import { listFlag, oneOf, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { checkFleet, FLEET_CONDITION_TYPES, fleetFor, NO_RUNNING_LOOP, UNCHECKED, type FleetCheck } from '../fleet-view';
import { handleOf, listNodes, mapLimit, stateOf } from '../nodes';
import { ago, print, printDocument, printLine, short, table } from '../output';
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
}

export interface StatusInput {
  values: StatusRaw;
  format: OutputFormat;
  conditions: string[];
  /** The authority to compare the loops with; null: --fleet and DATUM_FLEET unset, running loops only. */
  fleetDir: string | null;
  /** --selector: only the conditions of the nodes it selects. */
  selector: Selector | null;
}

interface Report {
  /** Nodes with a running loop. */
  nodes: number;
  /** Nodes the authority declares, null when no fleet directory was given (then only running loops were checked). */
  declared: number | null;
  fleet: string | null;
  conditions: OpenCondition[];
  unreadable: Array<{ node: string; error: string }>;
}

/**
 * Visibility lists the running loops (the same list call `datum nodes` makes) and says which have
 * an open condition (DatumConditions); only those are asked for the details: a fleet of 1000
 * right nodes costs one list, not 1000 queries. The authority's nodes that have no running loop
 * are conditions too (NO_RUNNING_LOOP): the fleet is not right while a node has no loop at all.
 */
async function openConditions(client: Client, types: string[], fleetDir: string | null): Promise<Report> {
  const loopTypes = types.filter((t) => t !== NO_RUNNING_LOOP);
  const running = await listNodes(client);
  const flagged = running.filter((r) => r.conditions.some((c) => types.length === 0 || loopTypes.includes(c)));
  const wantMissing = types.length === 0 || types.includes(NO_RUNNING_LOOP);
  const fleet = await checkFleet(client, wantMissing ? fleetDir : null, new Set(running.map((r) => r.node)));
  const conditions: OpenCondition[] = fleet.without_loop.map(withoutLoopCondition);
  const unreadable: Report['unreadable'] = [];
  await mapLimit(flagged, 32, async (row) => {
    try {
      const state = await stateOf(handleOf(client, row));
      for (const c of state.conditions)
        if (types.length === 0 || loopTypes.includes(c.type))
          conditions.push({ node: row.node, workflow_id: row.workflow_id, ...c });
    } catch (error) {
      unreadable.push({ node: row.node, error: (error as Error).message });
    }
  });
  conditions.sort(
    (a, b) =>
      a.node.localeCompare(b.node) || a.type.localeCompare(b.type) || (a.resource_key ?? '').localeCompare(b.resource_key ?? ''),
  );
  unreadable.sort((a, b) => a.node.localeCompare(b.node));
  return { nodes: running.length, declared: fleet.declared, fleet: fleetDir, conditions, unreadable };
}

function withoutLoopCondition(n: FleetCheck['without_loop'][number]): OpenCondition {
  return {
    node: n.node,
    workflow_id: n.last_loop?.workflow_id ?? null,
    type: NO_RUNNING_LOOP,
    resource_key: null,
    since: n.since,
    message: n.message,
    evidence: { desired_generation: n.desired_generation, end: n.end, last_loop: n.last_loop ? { ...n.last_loop } : null },
    tried: [],
    resolver: 'operator',
    needs_judgement: false,
  };
}

export const statusCommand: CommandModule<StatusRaw, StatusInput> = {
  input(values) {
    const conditions = oneOf(listFlag(values.condition), [...CONDITION_TYPES, ...FLEET_CONDITION_TYPES], '--condition');
    const fleetDir = fleetFor(conditions, values.fleet, values);
    return { values, format: outputFormat(values), conditions, fleetDir, selector: selectorFlag(values.selector) };
  },
  async run({ values, format, conditions: types, fleetDir, selector }) {
    return await withTemporal(values, async (client) => {
      const selected = await nodeMatcher(selector, fleetDir);
      const all = await openConditions(client, types, fleetDir);
      const report = selector
        ? {
            ...all,
            conditions: all.conditions.filter((c) => selected(c.node)),
            unreadable: all.unreadable.filter((u) => selected(u.node)),
          }
        : all;
      if (format === 'json') printDocument('json', report);
      else if (format === 'jsonl') {
        for (const c of report.conditions) printLine(c);
        for (const u of report.unreadable) printLine({ unreadable: true, ...u });
      } else printReport(report, types, selector?.text ?? null);
      return report.conditions.length === 0 && report.unreadable.length === 0 ? 0 : 1;
    });
  },
};

function printReport({ nodes, declared, conditions, unreadable }: Report, types: string[], selector: string | null): void {
  if (conditions.length === 0 && unreadable.length === 0) {
    // "The fleet is right" only when nothing was left out: no filter, and every declared node compared.
    if (selector !== null) print(`No open condition on the nodes --selector ${selector} selects.`);
    else if (types.length > 0) print(`No open ${types.join(' or ')} condition across ${nodes} running loop(s).`);
    else if (declared === null) print(`No open conditions across ${nodes} running loop(s).\n${UNCHECKED}`);
    else print(`No open conditions across ${Math.max(declared, nodes)} node(s): the fleet is right.`);
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
    `\n${conditions.length} open condition(s) on ${new Set(conditions.map((c) => c.node)).size} of ${declared === null ? nodes : Math.max(declared, nodes)} node(s). \`datum describe NODE\` explains one.`,
  );
  if (declared === null && types.length === 0) print(UNCHECKED);
}
