/*
 * What an operator does to nodes by name (`datum reconcile`, `datum hold`, `datum unhold`) and tells
 * a node's loop (`datum resolve`, `datum refresh`, `datum decommission`): part of the tree in
 * program.ts, kept apart for its size; each action loads its module only when it runs.
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

/** What an operator tells a loop: resolve a conflict, refresh its intent; and a node leaving the fleet. */
export function operatorCommands(program: Command, inv: Runner, sets: OptionSets): void {
  const { connection, output, timeoutOption, fleetOption } = sets;
  decommissionCommand(program, inv, sets);

  connection(
    output(
      program
        .command('resolve')
        .summary('resolve a CONFLICT: retake (Datum owns it) or yield (leave it to the other writer)')
        .description(
          `Sends the resolveConflict Update and prints the ledger entry the loop recorded for it.
retake: the other writer is gone (or must lose); Datum repairs again with a fresh retry budget.
yield:  the other writer owns the resource; Datum records it as an operator exception.
The CONFLICTING_WRITER condition closes only when a later observation confirms the resolution.`,
        )
        .argument('<node>', 'the node, such as N-24')
        .option('--resource <key>', 'the resource in conflict')
        .option('--resolution <retake|yield>', 'retake or yield')
        .option('--by <who>', 'who resolves it (recorded in the ledger)')
        .option('--note <text>', 'why (recorded in the ledger)')
        .option(
          '--sign-key <private key>',
          "sign the decision as an operator, with an Ed25519 key the node's agent.yaml lists in trust.operators (through ssh-keygen -Y sign -n datum-operator; a host that requires signatures honours a retake or an approve only so signed)",
        )
        .addOption(timeoutOption('the loop to record it (default 30s)')),
    ),
  ).action((node, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/resolve.js')).resolveCommand, { node, ...opts }),
  );

  connection(
    output(
      program
        .command('refresh')
        .summary("re-read a node's desired state and hand the refreshed intent to its loop")
        .description(
          `Reads FLEET/desired/nodes/NODE.yaml and sends the refreshDesired Update with its generation and digest, then prints the ledger entry the loop recorded: the same generation re-binds, a newer one hands over to datum/NODE/gen-<new>, an older one is refused (and recorded).`,
        )
        .argument('<node>', 'the node, such as N-24')
        .addOption(fleetOption())
        .addOption(timeoutOption('the loop to record it (default 30s)')),
    ),
  ).action((node, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/refresh.js')).refreshCommand, { node, ...opts }),
  );
}

/** `datum decommission`: a node leaves the fleet, and what Datum holds on it becomes a planned removal. */
function decommissionCommand(program: Command, inv: Runner, { connection, output, timeoutOption }: OptionSets): void {
  connection(
    output(
      program
        .command('decommission')
        .summary('a node leaves the fleet: its loops end, and what Datum holds on it becomes a planned removal')
        .description(
          `For a node whose desired state was removed from the authority: ends its reconcile loops, then asks its agent what Datum holds there (the files and flags it claimed) and opens a work item, datum-work/NODE/PLANNED_REMOVAL/decommission, that lists exactly what would be removed. Nothing is removed until someone approves that item (datum work resolve ITEM --resolution approve), and only where the node's agent.yaml allows removing those types (allow.destructive). Prints the item once its plan is made.`,
        )
        .argument('<node>', 'the node, such as N-24')
        .option('--by <who>', 'who decommissions it (recorded with the item)')
        .option('--note <text>', 'why')
        .addOption(timeoutOption('the plan (default 60s)')),
    ),
  ).action((node, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/decommission.js')).decommissionCommand, { node, ...opts }),
  );
}
