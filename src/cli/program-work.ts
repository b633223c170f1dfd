/*
 * The `datum work` command tree (docs/work-items.md): the work items Datum hands over when a
 * condition needs a judgement. Part of the tree in program.ts, kept apart for its size; like the
 * rest, each action loads its module only when that command runs.
 */
import type { Command, CommandUnknownOpts, Option } from '@commander-js/extra-typings';
import type { Invocation } from './invocation';

/** The invocation these commands run in (src/cli/invocation.ts), as far as they use it. */
export type Runner = Pick<Invocation, 'go'>;

/**
 * program.ts's option sets, handed in rather than imported (no circle, and no exported generic
 * whose inferred type tsc would have to print): each adds its options to a command.
 */
export interface OptionSets {
  connection: <C extends CommandUnknownOpts>(command: C) => C;
  output: <C extends CommandUnknownOpts>(command: C) => C;
  timeoutOption: (what: string) => Option;
  selectorOption: (what: string) => Option;
  fleetOption: () => Option;
}

const ITEM = 'the work item, as `datum work list` prints it (datum-work/NODE/CONDITION/RESOURCE)';

export function workCommands(program: Command, inv: Runner, { connection, output, timeoutOption }: OptionSets): void {
  const work: Command = program
    .command('work')
    .summary('work items: the conditions that need a judgement, claimed and resolved by a person or a program')
    .description(
      `Every condition that needs judgement (a conflict, a spent retry budget, a destructive repair, unknown ownership, a refused action, a digest mismatch, drift in observe mode) opens a work item: a workflow of its own, id datum-work/NODE/CONDITION/RESOURCE, holding what Datum knows and the resolutions it takes. A resolver claims it under a lease and resolves it; the item closes only when a later fresh observation shows the condition gone, and reopens with the new evidence when it does not. Two kinds no loop opens are work items too: a rollout halted at a failed gate (ROLLOUT_HALTED: continue, abort, rollback) and a planned removal (PLANNED_REMOVAL: approve, decline).`,
    );
  connection(
    output(
      work
        .command('list')
        .summary('open work items, oldest first, from Temporal visibility')
        .option('--node <nodes>', 'only these nodes, comma-separated')
        .option('--condition <types>', 'only these condition types, comma-separated')
        .option('--state <states>', 'only these states: PLANNING, OPEN, ESCALATED, CLAIMED, AWAITING_OBSERVATION, HELD')
        .option(
          '--selector <selector>',
          'only the items of the nodes it selects: role=web by the labels desired state gives nodes (reads the fleet directory), or name=web-*',
        )
        .option('--fleet <dir>', 'fleet directory, for a selector by labels (env: DATUM_FLEET)'),
    ),
  ).action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/work.js')).workListCommand, opts));

  connection(
    output(
      work
        .command('show')
        .summary('one work item: what is wrong, the evidence, what was tried, the ledger entries, the resolutions it takes')
        .argument('<item>', ITEM),
    ),
  ).action((item, opts, cmd) => inv.go(cmd, async () => (await import('./commands/work.js')).workShowCommand, { item, ...opts }));

  connection(
    output(
      work
        .command('claim')
        .summary('claim a work item under a lease (another resolver is refused until it ends)')
        .argument('<item>', ITEM)
        .option('--by <who>', 'who claims it (recorded with the identity Temporal records)')
        .option('--lease <duration>', 'how long the claim holds, 1s to 24h (default 15m); claim again to renew'),
    ),
  ).action((item, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/work.js')).workClaimCommand, { item, ...opts }),
  );

  connection(
    output(
      work
        .command('release')
        .summary('give a claimed work item back')
        .argument('<item>', ITEM)
        .option('--by <who>', 'who holds the claim'),
    ),
  ).action((item, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/work.js')).workReleaseCommand, { item, ...opts }),
  );

  resolvingCommands(work, inv, { connection, output, timeoutOption });
}

/** What changes an item: resolve, and serve (a program as the resolver). */
function resolvingCommands(
  work: Command,
  inv: Runner,
  { connection, output, timeoutOption }: Pick<OptionSets, 'connection' | 'output' | 'timeoutOption'>,
): void {
  connection(
    output(
      work
        .command('resolve')
        .summary('resolve a work item; the loop records it in the ledger and passes again at once')
        .description(
          `Sends the item's resolve Update. The item refuses a resolution its condition does not take, or one the node's agent.yaml or mode forbids, and records nothing; otherwise the loop records it (who, the identity Temporal recorded, why) and the item waits for the next fresh observation: closed if the condition is gone, reopened if not. \`datum work show ITEM\` lists the resolutions an item takes.`,
        )
        .argument('<item>', ITEM)
        .option(
          '--resolution <kind>',
          'retake, yield, grant, hold, approve, decline, adopt, leave, retry, rebind, continue, abort or rollback',
        )
        .option('--by <who>', 'who resolves it (recorded in the ledger)')
        .option('--note <text>', 'why (recorded in the ledger)')
        .option('--attempts <n>', 'grant only: how many more repair attempts (1 to retry_budget)')
        .option(
          '--episode <episode>',
          "the episode you judged, as `datum work claim` or `show` printed it: refused if the item reopened or its facts changed since (default: your claim's, else the one read now)",
        )
        .option(
          '--sign-key <private key>',
          "sign the decision as an operator, with an Ed25519 key the node's agent.yaml lists in trust.operators (through ssh-keygen -Y sign -n datum-operator; a host that requires signatures honours a retake or an approve only so signed)",
        )
        .addOption(timeoutOption('the loop to record it (default 60s)')),
    ),
  ).action((item, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/work.js')).workResolveCommand, { item, ...opts }),
  );

  connection(
    work
      .command('serve')
      .summary('resolve work items with a program: the item as JSON on its stdin, its resolution as JSON on its stdout')
      .description(
        `Claims each open, unclaimed work item the filters match (one winner among racing resolvers), runs PROGRAM with the item (the JSON of \`datum work show -o json\`) on stdin and DATUM_WORK_ITEM set, and sends its answer: {"resolution": "retake", "note": "why"} (plus "attempts" for grant), or {"release": true} to leave the item to someone else. A program that fails or answers nonsense releases the claim. One JSON line per item on stdout. Runs until Ctrl-C, or with --once over the items open now.`,
      )
      .option('--exec <program>', 'the resolver program')
      .option('--by <name>', 'the name the resolutions are recorded under, such as resolver-bot')
      .option('--node <nodes>', 'only these nodes, comma-separated')
      .option('--condition <types>', 'only these condition types, comma-separated')
      .option('--lease <duration>', 'how long each claim holds while the program decides (default 15m)')
      .option('--interval <duration>', 'how often to look for open items (default 5s)')
      .option('--once', 'handle the items open now, then exit'),
  ).action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/work-serve.js')).workServeCommand, opts));
}
