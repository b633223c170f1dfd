import { DEFAULT_AGENT_CONFIG } from '../dirs';
import { UsageError, wholeFlag } from '../args';
import { withFix } from '../errors';
import type { CommandModule } from '../command';

/*
 * `datum agent reset-fence`: moves a node's generation fence back down, on the node, after a
 * generation was published by mistake (docs/operations.md, "A generation published by mistake").
 * The agent's records are serialised by a lock inside the agent's own process, so this command
 * runs only while no agent serves the root, and holds the root itself meanwhile
 * (src/agent/node/holder.ts). The reset is recorded: .datum/fence-resets.jsonl keeps every one,
 * fence.json the last, which the agent reports with every snapshot and the ledger records.
 */

interface ResetFenceRaw {
  config?: string;
  node?: string;
  to?: string;
  by?: string;
  reason?: string;
}

export interface ResetFenceInput {
  configPath: string;
  node: string;
  to: number;
  by: string;
  reason: string;
}

/** A required text option, non-empty once trimmed. */
function text(value: string | undefined, flag: string, example: string): string {
  const trimmed = value?.trim() ?? '';
  if (trimmed === '')
    throw new UsageError(withFix(`${flag} is required: a reset of the fence is recorded with it`, `such as ${flag} ${example}`));
  return trimmed;
}

export const resetFenceCommand: CommandModule<ResetFenceRaw, ResetFenceInput> = {
  input(values) {
    return {
      configPath: values.config ?? DEFAULT_AGENT_CONFIG,
      node: text(values.node, '--node', 'N-24'),
      to: wholeFlag(values.to, '--to', '10'),
      by: text(values.by, '--by', 'oncall'),
      reason: text(values.reason, '--reason', '"generation 100000000 was a typo for 10 (CHG-1234)"'),
    };
  },
  async run(input) {
    const [{ resetNodeFence }] = await Promise.all([import('../../agent/node/fence-reset.js')]);
    const done = await resetNodeFence(input);
    process.stdout.write(
      `datum agent reset-fence: node ${input.node}: fence moved from generation ${done.reset.from} to ${done.reset.to} by ${done.reset.by} (${done.reset.reason}); recorded in ${done.log}\n` +
        `next: publish generation ${done.reset.to + 1} or newer and roll it out; its loop's next ledger entry carries the reset\n`,
    );
    return 0;
  },
};
