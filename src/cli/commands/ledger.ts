import { openLedgerStore } from '../../activities/ledger-store';
import { parse } from '../args';
import type { Command } from '../main';
import { checkNode } from '../nodes';
import { print, printJson, table } from '../output';
import { dataDirFrom } from './worker';

/** The parse layer: options and the node, checked before the store is opened (fuzzed in test/fuzz/cli.test.ts). */
export function ledgerArgs(argv: string[]) {
  const { values, positionals } = parse(
    argv,
    { json: { type: 'boolean' }, since: { type: 'string' }, data: { type: 'string' } },
    true,
  );
  return { values, node: checkNode(positionals[0]) };
}

export const ledgerCommand: Command = {
  summary: "a node's ledger from the store (every decision, across generations and continue-as-new)",
  usage: `usage: datum ledger NODE [--json] [--since TIME] [--data DIR]

Reads the ledger store: $DATUM_LEDGER_URL (postgres://…) or DIR/ledger.sqlite (--data,
$DATUM_DATA, ./.datum). TIME is ISO 8601, such as 2026-11-29T10:00:00Z or 2026-11-29.`,
  async run(argv) {
    const { values, node } = ledgerArgs(argv);
    const store = await openLedgerStore({ dataDir: dataDirFrom(values.data) });
    try {
      const entries = await store.list(node, values.since ? { since: values.since } : {});
      if (values.json) {
        printJson(entries);
        return 0;
      }
      if (entries.length === 0) {
        print(`No ledger entries for ${node} in ${store.location}${values.since ? ` since ${values.since}` : ''}.`);
        return 0;
      }
      print(
        table(
          ['DECIDED', 'GEN', 'SEQ', 'STATUS', 'REASON', 'ACTIONS', 'DETAIL'],
          entries.map((e) => [
            e.decided_at,
            String(e.desired_generation),
            String(e.seq),
            e.convergence_status,
            e.reason,
            e.execution_evidence.map((x) => `${x.resource_key}:${x.action}=${x.outcome}`).join(', ') || '-',
            e.reason_detail,
          ]),
        ),
      );
      return 0;
    } finally {
      await store.close();
    }
  },
};
