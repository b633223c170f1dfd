import type { Client } from '@temporalio/client';
import { addMs, parseHold, parseUnhold, type LedgerEntry } from '../../domain';
import {
  holdUpdate,
  ledgerQuery,
  reconcileUpdate,
  unholdUpdate,
  withFix,
  type HoldPayload,
  type NodeState,
  type UnholdPayload,
} from '../../contract';
import { UsageError, durationFlag, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { EXIT } from '../errors';
import { checkNode, loopFor, mapLimit, stateOf, type NodeLoop } from '../nodes';
import { print, printDocument } from '../output';
import { sendUpdate, type OperatorUpdate } from '../updates';
import type { CommandModule } from '../command';

/*
 * What an operator does to nodes by name, each through an Update of the node's loop:
 * `datum reconcile` (a pass now, and what it recorded), `datum hold` and `datum unhold`
 * (src/workflows/holds.ts). One node's failure is reported and the others go on.
 */

interface NodesRaw extends ConnectionFlags, OutputFlags {
  nodes: string[];
  timeout?: string;
}

interface Outcome {
  node: string;
  ok: boolean;
  /** What the loop recorded for the request (or, for reconcile, its pass), null when it wrote nothing. */
  entry: LedgerEntry | null;
  /** One line a person reads. */
  said: string;
  status?: string | null;
}

function checkNodes(nodes: string[]): string[] {
  if (nodes.length === 0) throw new UsageError(withFix('which nodes?', 'name one or more, such as `N-24 N-25`'));
  return [...new Set(nodes.map(checkNode))];
}

/** Runs `each` on every node's loop (8 at a time), prints the outcomes, and says whether all went well. */
async function onNodes(
  values: ConnectionFlags,
  nodes: string[],
  format: OutputFormat,
  each: (client: Client, loop: NodeLoop) => Promise<Omit<Outcome, 'node'>>,
): Promise<number> {
  return await withTemporal(values, async (client) => {
    const outcomes = await mapLimit(nodes, 8, async (node): Promise<Outcome> => {
      try {
        return { node, ...(await each(client, await loopFor(client, node))) };
      } catch (error) {
        return { node, ok: false, entry: null, said: (error as Error).message };
      }
    });
    if (format !== 'text') printDocument(format, outcomes);
    else for (const o of outcomes) print(`${o.node}: ${o.said}`);
    return outcomes.every((o) => o.ok) ? EXIT.ok : EXIT.finding;
  });
}

const timeoutOf = (raw: string | undefined, fallback: number) => (raw === undefined ? fallback : durationFlag(raw, '--timeout'));

// ---------------------------------------------------------------------------------------------
// datum reconcile NODE… [--wait]

interface ReconcileRaw extends NodesRaw {
  wait?: boolean;
}

export interface ReconcileInput {
  values: ReconcileRaw;
  nodes: string[];
  format: OutputFormat;
  wait: boolean;
  timeoutMs: number;
}

export const reconcileCommand: CommandModule<ReconcileRaw, ReconcileInput> = {
  input(values) {
    return {
      values,
      nodes: checkNodes(values.nodes),
      format: outputFormat(values),
      wait: values.wait === true,
      timeoutMs: timeoutOf(values.timeout, 120_000),
    };
  },
  async run({ values, nodes, format, wait, timeoutMs }) {
    return onNodes(values, nodes, format, async (client, loop) => {
      const accepted = await loop.handle.executeUpdate(reconcileUpdate, { args: [] });
      if (!wait) return { ok: true, entry: null, said: `a pass is requested of ${accepted.workflow_id}` };
      const state = await passAnswering(loop, accepted.passes.started + 1, timeoutMs);
      const entries = await loop.handle.query(ledgerQuery);
      const entry =
        [...entries].reverse().find((e) => e.seq > accepted.last_seq && e.workflow_id === accepted.workflow_id) ?? null;
      const status = state.convergence_status;
      return { ok: status !== 'BLOCKED' && status !== 'CONFLICT', entry, status, said: passWords(state, entry) };
    });
  },
};

/** Polls the loop's state until pass number `pass` is recorded; refuses to wait on a loop that does not count passes. */
async function passAnswering(loop: NodeLoop, pass: number, timeoutMs: number): Promise<NodeState> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await stateOf(loop);
    if (!state.passes)
      throw new Error(
        withFix(
          `${loop.workflowId} runs a release that does not count its passes`,
          'run without --wait, then `datum describe` the node',
        ),
      );
    if (state.passes.done >= pass) return state;
    if (state.superseded_by)
      throw new Error(
        withFix(`${loop.workflowId} handed the node over to ${state.superseded_by} before its pass`, 'reconcile the node again'),
      );
    if (Date.now() > deadline)
      throw new Error(
        withFix(
          `${loop.workflowId} has not recorded the pass within ${Math.round(timeoutMs / 1000)} s (it is at pass ${state.passes.done} of ${pass})`,
          'check that a controller worker runs and the node answers (`datum describe`), or pass a longer --timeout',
        ),
      );
    await new Promise((r) => setTimeout(r, 250));
  }
}

function passWords(state: NodeState, entry: LedgerEntry | null): string {
  const now = `${state.convergence_status}/${state.reason}`;
  if (entry) return `${entry.convergence_status}/${entry.reason} (ledger #${entry.seq}): ${entry.reason_detail}`;
  return `${now}, as the last entry says (the pass changed nothing, so it wrote none); verified at ${state.last_verified_at ?? 'never'}`;
}

// ---------------------------------------------------------------------------------------------
// datum hold NODE… --by --reason [--until], datum unhold NODE… --by [--note]

interface HoldRaw extends NodesRaw {
  by?: string;
  reason?: string;
  until?: string;
}

/** --until: an ISO 8601 time, or a duration from now (2h, 90m). */
function untilOf(raw: string | undefined, now: Date): string | null {
  if (raw === undefined) return null;
  if (/^\d+(ms|s|m|h|d)/.test(raw.trim())) return addMs(now.toISOString(), durationFlag(raw.trim(), '--until'));
  const at = Date.parse(raw);
  if (Number.isNaN(at))
    throw new UsageError(
      withFix(
        `--until ${JSON.stringify(raw)} is neither a time nor a duration`,
        'such as --until 2h or --until 2026-12-06T18:00:00Z',
      ),
    );
  return new Date(at).toISOString();
}

/** The input of `datum hold` and `datum unhold`: the nodes, and the Update's payload, checked before it is sent. */
export interface HoldingInput<P> {
  values: NodesRaw;
  nodes: string[];
  format: OutputFormat;
  payload: P;
  timeoutMs: number;
}

/** `datum hold` or `datum unhold`: one Update to each node's loop, the entry it recorded printed. */
function holdingCommand<R extends NodesRaw, P>(
  payloadOf: (values: R) => P,
  check: (payload: P) => { ok: true } | { ok: false; error: string },
  update: OperatorUpdate<P>,
): CommandModule<R, HoldingInput<P>> {
  return {
    input(values) {
      const payload = payloadOf(values);
      // The loop judges it again by its own clock; this says what is wrong before anything is sent.
      const parsed = check(payload);
      if (!parsed.ok) throw new UsageError(parsed.error);
      const timeoutMs = timeoutOf(values.timeout, 30_000);
      return { values, nodes: checkNodes(values.nodes), format: outputFormat(values), payload, timeoutMs };
    },
    async run({ values, nodes, format, payload, timeoutMs }) {
      return onNodes(values, nodes, format, async (_client, loop) => {
        const { entry, decision } = await sendUpdate(loop, update, payload, timeoutMs);
        return { ok: true, entry, said: `${entry?.reason ?? decision.reason}: ${decision.reason_detail}` };
      });
    },
  };
}

export const holdCommand = holdingCommand<HoldRaw, HoldPayload>(
  (values) => ({ by: values.by ?? '', reason: values.reason ?? '', until: untilOf(values.until, new Date()) }),
  (payload) => parseHold(payload, new Date().toISOString()),
  holdUpdate,
);

interface UnholdRaw extends NodesRaw {
  by?: string;
  note?: string;
}

export const unholdCommand = holdingCommand<UnholdRaw, UnholdPayload>(
  (values) => ({ by: values.by ?? '', ...(values.note ? { note: values.note } : {}) }),
  (payload) => parseUnhold(payload),
  unholdUpdate,
);
