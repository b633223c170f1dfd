import { parseSignal, type Condition } from '../../domain';
import { resolveConflictUpdate, withFix, type ResolveConflictPayload } from '../../contract';
import { UsageError, durationFlag, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { checkNode, loopFor, stateOf } from '../nodes';
import { print, printDocument } from '../output';
import type { CommandModule } from '../command';
import { sendUpdate } from '../updates';
import { retakeStatement, signDecision } from '../operator-sign';

interface ResolveRaw extends ConnectionFlags, OutputFlags {
  node: string;
  resource?: string;
  resolution?: string;
  by?: string;
  note?: string;
  timeout?: string;
  signKey?: string;
}

export interface ResolveInput {
  values: ResolveRaw;
  node: string;
  format: OutputFormat;
  parsed: { ok: true; value: ResolveConflictPayload };
  timeoutMs: number;
}

/**
 * A condition resolveConflict settles: an open conflict, or a yield whose value desired state
 * changed (UNKNOWN_OWNERSHIP whose claim lists the resolutions it takes).
 */
function resolvable(c: Condition): boolean {
  if (c.type === 'CONFLICTING_WRITER') return true;
  const claim = (c.evidence as { claim?: { resolutions?: unknown } } | null)?.claim;
  return c.type === 'UNKNOWN_OWNERSHIP' && Array.isArray(claim?.resolutions);
}

export const resolveCommand: CommandModule<ResolveRaw, ResolveInput> = {
  input(values) {
    const node = checkNode(values.node);
    // Options named after the payload's fields; the contract's schema judges them, as the workflow will.
    const payload: Partial<Record<keyof ResolveConflictPayload, string>> = {
      resource_key: values.resource,
      resolution: values.resolution,
      by: values.by,
      ...(values.note ? { note: values.note } : {}),
    };
    const parsed = parseSignal(resolveConflictUpdate.name, payload);
    if (!parsed.ok) throw new UsageError(parsed.problems.join('; '));
    const timeoutMs = values.timeout === undefined ? 30_000 : durationFlag(values.timeout, '--timeout');
    return { values, node, format: outputFormat(values), parsed, timeoutMs };
  },
  async run({ values, node, format, parsed, timeoutMs }) {
    return await withTemporal(values, async (client) => {
      const loop = await loopFor(client, node);
      // The Update's validator refuses the same, but this names the open conflicts there are.
      const state = await stateOf(loop);
      const open = state.conditions.filter(resolvable).map((c) => c.resource_key);
      if (!open.includes(parsed.value.resource_key)) {
        throw new Error(
          withFix(
            `${node} has no open conflict on "${parsed.value.resource_key}"${open.length ? ` (open conflicts: ${open.join(', ')})` : ' (it has none)'}`,
            `check \`datum describe ${node}\``,
          ),
        );
      }
      const { resource_key, resolution, by } = parsed.value;
      if (values.signKey !== undefined && resolution !== 'retake')
        throw new UsageError('--sign-key signs a retake only (a yield narrows what the host writes and needs no signature)');
      const operator =
        values.signKey === undefined ? null : await signDecision(values.signKey, retakeStatement(node, resource_key, by));
      const result = await sendUpdate(
        loop,
        resolveConflictUpdate,
        { ...parsed.value, ...(operator ? { operator } : {}) },
        timeoutMs,
      );
      const entry = result.entry ?? result.decision;
      if (format !== 'text') printDocument(format, entry);
      else print(`${node}: ${entry.reason_detail}`);
      return entry.reason === 'SIGNAL_REJECTED' ? 1 : 0;
    });
  },
};
