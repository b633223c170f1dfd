import { parseSignal } from '../../domain';
import { withClient } from '../../worker/connection';
import { ledgerQuery, resolveConflictSignal, withFix, type ResolveConflictPayload } from '../../contract';
import { CONNECTION_OPTIONS, UsageError, parse } from '../args';
import type { Command } from '../main';
import { checkNode, loopFor, stateOf } from '../nodes';
import { print, printJson } from '../output';

/** The parse layer: options, the node and the signal's payload as the workflow will judge it (fuzzed in test/fuzz/cli.test.ts). */
export function resolveArgs(argv: string[]) {
  const { values, positionals } = parse(
    argv,
    {
      resource: { type: 'string' },
      resolution: { type: 'string' },
      by: { type: 'string' },
      note: { type: 'string' },
      json: { type: 'boolean' },
      ...CONNECTION_OPTIONS,
    },
    true,
  );
  const node = checkNode(positionals[0]);
  // Options named after the payload's fields; the contract's schema judges them, as the workflow will.
  const payload: Partial<Record<keyof ResolveConflictPayload, string>> = {
    resource_key: values.resource,
    resolution: values.resolution,
    by: values.by,
    ...(values.note ? { note: values.note } : {}),
  };
  const parsed = parseSignal(resolveConflictSignal.name, payload);
  if (!parsed.ok) throw new UsageError(parsed.problems.join('; '));
  return { values, node, parsed };
}

export const resolveCommand: Command = {
  summary: 'resolve a CONFLICT: retake (Datum owns it) or yield (leave it to the other writer)',
  usage: `usage: datum resolve NODE --resource KEY --resolution retake|yield --by WHO [--note TEXT] [--json]

retake: the other writer is gone (or must lose); Datum repairs again with a fresh retry budget.
yield:  the other writer owns the resource; Datum records it as an operator exception.
The CONFLICTING_WRITER condition closes only when a later observation confirms the resolution.`,
  async run(argv) {
    const { values, node, parsed } = resolveArgs(argv);
    return await withClient({ address: values.address, namespace: values.namespace }, async (client) => {
      const loop = await loopFor(client, node);
      const state = await stateOf(loop);
      const open = state.conditions.filter((c) => c.type === 'CONFLICTING_WRITER').map((c) => c.resource_key);
      if (!open.includes(parsed.value.resource_key)) {
        throw new Error(
          withFix(
            `${node} has no open conflict on "${parsed.value.resource_key}"${open.length ? ` (open conflicts: ${open.join(', ')})` : ' (it has none)'}`,
            `check \`datum describe ${node}\``,
          ),
        );
      }
      const before = (await loop.handle.query(ledgerQuery)).length;
      await loop.handle.signal(resolveConflictSignal, parsed.value);
      // Wait for the loop to record it, so the operator sees it took.
      const deadline = Date.now() + 15_000;
      for (;;) {
        const ledger = await loop.handle.query(ledgerQuery);
        const entry = ledger
          .slice(before)
          .find((e) => e.reason === 'OPERATOR_RESOLUTION_RECORDED' || e.reason === 'SIGNAL_REJECTED');
        if (entry) {
          if (values.json) printJson(entry);
          else print(`${node}: ${entry.reason_detail}`);
          return entry.reason === 'SIGNAL_REJECTED' ? 1 : 0;
        }
        if (Date.now() > deadline) {
          print(
            `${node}: signal sent to ${loop.workflowId}; the loop has not recorded it yet (is a controller worker running?).`,
          );
          return 1;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    });
  },
};
