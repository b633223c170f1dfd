/*
 * `datum agent reset-fence` (also `datum-agent reset-fence`): the agent's one subcommand, run on
 * the node with the agent stopped (docs/operations.md, "A generation published by mistake"). Part
 * of the tree in program.ts, kept apart for its size; its module loads only when it runs.
 */
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import type { Runner } from './program-work';

export function resetFenceCommandOn(command: CommandUnknownOpts, inv: Runner): void {
  command
    .command('reset-fence')
    .summary("move a node's generation fence back down, after a generation was published by mistake (on the node, agent stopped)")
    .description(
      `Moves the fence of NODE (the newest generation its agent accepted; older ones are refused) back to --to, which must be below it. Run it on the node, as the user the agent runs as, with the agent stopped: it refuses while an agent serves the root. End the mistaken generation's loop first (docs/operations.md, "A generation published by mistake"). The reset is recorded: ROOT/.datum/fence-resets.jsonl keeps every one, and the next snapshot the agent takes carries it into the loop's ledger entry.`,
    )
    .option('--config <path>', "the node's agent.yaml (default /etc/datum/agent.yaml)")
    .option('--node <node>', 'the node, as its agent.yaml names it (a check that this is the node you mean)')
    .option('--to <generation>', 'the generation to move the fence back to, below the fence')
    .option('--by <who>', 'who resets it (recorded)')
    .option('--reason <text>', 'why (recorded)')
    .action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/reset-fence.js')).resetFenceCommand, opts));
}
