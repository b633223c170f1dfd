/*
 * What an operator does to nodes by name (`datum reconcile`, `datum hold`, `datum unhold`): part of
 * the tree in program.ts, kept apart for its size; each action loads its module only when it runs.
 */
import type { Command } from '@commander-js/extra-typings';
import type { OptionSets, Runner } from './program-work';

const NODES = 'the nodes, such as N-24 N-25';
const load = async () => await import('./commands/node-ops.js');

export function nodeCommands(program: Command, inv: Runner, { connection, output, timeoutOption }: OptionSets): void {
  connection(
    output(
      program
        .command('reconcile')
        .summary('a pass now on each node, and (with --wait) the ledger entry it wrote')
        .description(
          `Sends each node's loop the reconcile Update: the loop passes at once (observe, decide, act where authorized, probe, decide), as at its resync. With --wait it waits for that pass (the first to start after the request) and prints the ledger entry it wrote, or says that the pass changed nothing (a steady pass writes no entry). Exit code 1 when a node has no loop, its pass was not recorded in time, or it ends BLOCKED or CONFLICT.`,
        )
        .argument('<nodes...>', NODES)
        .option('--wait', 'wait for the pass and print what it recorded')
        .addOption(timeoutOption('each pass with --wait (default 2m)')),
    ),
  ).action((nodes, opts, cmd) => inv.go(cmd, async () => (await load()).reconcileCommand, { nodes, ...opts }));

  connection(
    output(
      program
        .command('hold')
        .summary('stop repairs on nodes, recorded and time-boxed; they keep observing and reporting')
        .description(
          `Sends each node's loop the hold Update. Until --until passes or \`datum unhold\`, the loop observes and reports as before, and drift is reported with the plan a repair would run, not applied (DRIFTED/HELD, a DRIFT_HELD condition per resource). Every ledger entry while it lasts carries the hold: by whom, why, until when, and the identity Temporal recorded for the request. A hold outlives the loop that took it: a newer generation's loop starts held. A step toward less trust, so it needs no operator key; the hold's end brings the repair.`,
        )
        .argument('<nodes...>', NODES)
        .option('--by <who>', 'who holds them (recorded on every entry)')
        .option('--reason <text>', 'why (recorded on every entry)')
        .option(
          '--until <time>',
          'when the hold ends by itself: an ISO 8601 time or a duration from now (2h); default: until `datum unhold`',
        )
        .addOption(timeoutOption('each loop to record it (default 30s)')),
    ),
  ).action((nodes, opts, cmd) => inv.go(cmd, async () => (await load()).holdCommand, { nodes, ...opts }));

  connection(
    output(
      program
        .command('unhold')
        .summary('end the hold on nodes: the pass that follows repairs what it finds')
        .argument('<nodes...>', NODES)
        .option('--by <who>', 'who ends the hold (recorded)')
        .option('--note <text>', 'why (recorded)')
        .addOption(timeoutOption('each loop to record it (default 30s)')),
    ),
  ).action((nodes, opts, cmd) => inv.go(cmd, async () => (await load()).unholdCommand, { nodes, ...opts }));
}
