import { withClient } from '../../worker/connection';
import { CONNECTION_OPTIONS, parse } from '../args';
import type { Command } from '../main';
import { runningLoops, stateOf } from '../nodes';
import { ago, print, printJson, short, table } from '../output';

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

/** The parse layer (fuzzed in test/fuzz/cli.test.ts). */
export const statusArgs = (argv: string[]) => parse(argv, { json: { type: 'boolean' }, ...CONNECTION_OPTIONS });

export const statusCommand: Command = {
  summary: 'open conditions across the fleet (empty means the fleet is right)',
  usage: `usage: datum status [--json] [--address HOST:PORT] [--namespace NS]

Lists every open condition of every running reconcile loop: what is wrong, on which node and
resource, since when, the evidence, what was tried and who can resolve it. Exit code 0 when
there is none, 1 when there is at least one.`,
  async run(argv) {
    const { values } = statusArgs(argv);
    return await withClient({ address: values.address, namespace: values.namespace }, async (client) => {
      const loops = [...(await runningLoops(client)).entries()].sort(([a], [b]) => a.localeCompare(b));
      const conditions: OpenCondition[] = [];
      const unreadable: Array<{ node: string; error: string }> = [];
      await Promise.all(
        loops.map(async ([node, loop]) => {
          try {
            const state = await stateOf(loop);
            for (const c of state.conditions) conditions.push({ node, workflow_id: loop.workflowId, ...c });
          } catch (error) {
            unreadable.push({ node, error: (error as Error).message });
          }
        }),
      );
      conditions.sort(
        (a, b) =>
          a.node.localeCompare(b.node) ||
          a.type.localeCompare(b.type) ||
          (a.resource_key ?? '').localeCompare(b.resource_key ?? ''),
      );
      if (values.json) {
        printJson({ nodes: loops.length, conditions, unreadable });
      } else if (conditions.length === 0 && unreadable.length === 0) {
        print(`No open conditions across ${loops.length} node(s): the fleet is right.`);
      } else {
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
          `\n${conditions.length} open condition(s) on ${new Set(conditions.map((c) => c.node)).size} of ${loops.length} node(s). \`datum describe NODE\` explains one.`,
        );
      }
      return conditions.length === 0 && unreadable.length === 0 ? 0 : 1;
    });
  },
};
