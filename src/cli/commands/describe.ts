import { ledgerQuery, type NodeState } from '../../contract';
import type { LedgerEntry } from '../../domain';
import { outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { checkNode, loopFor, stateOf } from '../nodes';
import { ago, oneLine, print, printDocument, short, table } from '../output';
import type { CommandModule } from '../command';

/** What an operator does about each status, in one sentence. */
const NEXT: Record<string, string> = {
  CONVERGED: 'Nothing to do; Datum re-verifies every resync_interval.',
  DRIFTED:
    'Drift is reported, not repaired: fix the node or the desired state, or move the host/resource to enforce in agent.yaml.',
  RETRY: 'Datum is retrying within its budget; watch the next decision.',
  BLOCKED: 'Datum will not act until the evidence named below changes; the conditions say who can resolve it.',
  CONFLICT:
    'Another writer is changing a managed resource: stop it and `datum resolve NODE --resource KEY --resolution retake --by YOU`, or leave it to them with --resolution yield.',
  SUPERSEDED: 'A newer generation owns this node now.',
};

interface DescribeRaw extends ConnectionFlags, OutputFlags {
  node: string;
}

export interface DescribeInput {
  node: string;
  format: OutputFormat;
  values: DescribeRaw;
}

export const describeCommand: CommandModule<DescribeRaw, DescribeInput> = {
  input(values) {
    return { values, node: checkNode(values.node), format: outputFormat(values) };
  },
  async run({ values, node, format }) {
    return await withTemporal(values, async (client) => {
      const loop = await loopFor(client, node);
      const [state, ledger] = await Promise.all([stateOf(loop), loop.handle.query(ledgerQuery)]);
      const last = ledger[ledger.length - 1];
      if (format !== 'text') {
        printDocument(format, {
          state,
          resources: last?.resources ?? [],
          operator_exceptions: last?.operator_exceptions ?? [],
          recent: ledger.slice(-5),
        });
        return 0;
      }
      printDecision(node, loop.workflowId, state);
      if (last) printResources(last);
      printConditions(state);
      printRecent(ledger);
      return 0;
    });
  },
};

function printDecision(node: string, workflowId: string, state: NodeState): void {
  print(
    `${node}  generation ${state.desired_generation}  ${state.desired_digest.slice(0, 19)}…  mode ${state.mode ?? '?'}  (${workflowId})`,
  );
  print(`\n${state.convergence_status ?? 'no decision yet'} ${state.reason ?? ''}`);
  if (state.reason_detail) print(`  ${oneLine(state.reason_detail)}`);
  const t = state.recheck_trigger;
  if (t) print(`  rechecks on: ${t.trigger}${t.not_before ? ` (not before ${t.not_before})` : ''} — ${t.detail}`);
  print(`  last verified: ${ago(state.last_verified_at)}   repairs this episode: ${state.attempt_count}/${state.retry_budget}`);
  if (state.convergence_status) print(`\nNext: ${NEXT[state.convergence_status].replace('NODE', node)}`);
}

function printResources(last: LedgerEntry): void {
  // After a repair, what the fresh post-action probe saw is the node's state.
  const post = (last.post_action_observation as { resources?: Record<string, { value: unknown; drift: boolean }> } | null)
    ?.resources;
  print('\nResources');
  const rows = last.resources.map((r) => {
    const probed = post?.[r.resource_key];
    const observed = probed ? probed.value : r.observed;
    const drift = probed ? probed.drift : r.drift;
    return [r.resource_key, r.ownership, r.effective_mode, drift ? 'yes' : 'no', short(r.desired, 40), short(observed, 40)];
  });
  print(table(['RESOURCE', 'OWNERSHIP', 'MODE', 'DRIFT', 'DESIRED', 'OBSERVED'], rows));
  for (const e of last.operator_exceptions) print(`  operator exception: ${e.resource_key} — ${short(e.provenance, 100)}`);
}

function printConditions(state: NodeState): void {
  if (state.conditions.length === 0) return;
  print('\nOpen conditions');
  for (const c of state.conditions) {
    const judgement = c.needs_judgement ? ', needs judgement' : '';
    print(
      `  ${c.type}${c.resource_key ? ` on ${c.resource_key}` : ''} since ${ago(c.since)} — resolver: ${c.resolver}${judgement}`,
    );
    print(`    ${oneLine(c.message)}`);
    if (c.tried.length) print(`    tried: ${oneLine(c.tried.join('; '))}`);
  }
}

function printRecent(ledger: LedgerEntry[]): void {
  print('\nLast decisions');
  const rows = ledger
    .slice(-5)
    .map((e) => [
      String(e.seq),
      ago(e.decided_at),
      e.convergence_status,
      e.reason,
      e.authorized_actions.map((a) => `${a.resource_key}:${a.action}`).join(', ') || '-',
    ]);
  print(table(['SEQ', 'DECIDED', 'STATUS', 'REASON', 'ACTIONS'], rows));
}
