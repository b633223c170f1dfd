/*
 * `datum rollout` (start, status, pause, resume, list, cancel): part of the tree in program.ts,
 * kept apart for its size; each action loads its module only when that command runs.
 */
import type { Command } from '@commander-js/extra-typings';
import type { OptionSets, Runner } from './program-work';

export function rolloutCommands(program: Command, inv: Runner, sets: OptionSets): void {
  const { connection, output, timeoutOption, selectorOption, fleetOption } = sets;
  const rollout = program
    .command('rollout')
    .summary('roll a generation out to nodes, in waves if asked, and follow, pause, list or cancel rollouts')
    .description(
      `A rollout starts (or attaches to) one reconcileNode per node at generation G, hands over from older generations, and refuses nodes whose desired state is not at G (the others go on). Without waves, every node at once. In waves (--waves or --wave-plan), a wave starts only when every node of the wave before it is CONVERGED, by a fresh observation, within the gate's deadline, as the ledger records it; a failed gate halts the rollout and opens a work item (continue, abort or rollback).`,
    );
  connection(
    output(
      rollout
        .command('start')
        .summary('start (or attach to) a rollout of a generation to nodes')
        .description(
          `Starts one reconcileNode per node at generation G (or attaches to the running one). --all takes every node in FLEET/desired/nodes. --wait shows per-node progress until every node is CONVERGED, DRIFTED, BLOCKED or CONFLICT, and exits 1 if any node ends BLOCKED or CONFLICT or was refused (-o jsonl: one progress object a line).`,
        )
        .option('--generation <G>', 'the generation the desired-state files declare')
        .option('--nodes <nodes>', 'the nodes, comma-separated (N-1,N-2)')
        .option('--all', 'every node in FLEET/desired/nodes')
        .addOption(selectorOption('the nodes of FLEET/desired/nodes it selects'))
        .addOption(fleetOption())
        .option('--waves <sizes>', 'roll out in waves of these sizes, each counted from the first: 1,10%,50%,100%')
        .option('--wave-plan <file>', 'roll out in the waves a YAML file lists, each by size or by selector (docs/operations.md)')
        .option('--max-unavailable <n>', 'at most N nodes (or N% of a wave) on their way at once (default: a whole wave)')
        .option(
          '--gate-deadline <duration>',
          'how long each node of a wave has to be CONVERGED before the gate fails (default 10m)',
        )
        .option('--wait', 'follow the rollout until every node has settled')
        .addOption(timeoutOption('the rollout with --wait (default: no limit)')),
    ),
  ).action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/rollout.js')).rolloutStartCommand, opts));

  connection(
    output(
      rollout
        .command('status')
        .summary("a rollout's per-node progress (the newest rollout without ROLLOUT)")
        .argument('[rollout]', 'the rollout id, such as datum-rollout/gen-12/N-24')
        .option('--generation <G>', 'the newest rollout of this generation')
        .option('--wait', 'follow it until every node has settled')
        .addOption(timeoutOption('it with --wait (default: no limit)')),
    ),
  ).action((id, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/rollout-manage.js')).rolloutStatusCommand, { id, ...opts }),
  );

  pauseCommands(rollout, inv, sets);

  rolloutListing(rollout, inv, sets);
}

/** `datum rollout list|cancel`: rollouts as objects. */
function rolloutListing(rollout: Command, inv: Runner, { connection, output }: OptionSets): void {
  connection(
    output(
      rollout
        .command('list')
        .summary('rollouts, newest first')
        .option('--generation <G>', 'only rollouts of this generation')
        .option('--running', 'only rollouts still running')
        .option('--limit <n>', 'at most N rollouts (default 50)'),
    ),
  ).action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/rollout-manage.js')).rolloutListCommand, opts));

  connection(
    output(
      rollout
        .command('cancel')
        .summary('stop a rollout from starting more nodes; the loops it started keep running')
        .description(
          `Cancels the rollout workflow: it starts no node it has not started yet and stops following the others. The reconcile loops it already started are separate workflows and go on (end one with \`temporal workflow terminate\`).`,
        )
        .argument('<rollout>', 'the rollout id, such as datum-rollout/gen-12/N-24'),
    ),
  ).action((id, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/rollout-manage.js')).rolloutCancelCommand, { id, ...opts }),
  );
}

/** `datum rollout pause|resume`: a rollout in waves starts nothing while paused. */
function pauseCommands(rollout: Command, inv: Runner, { connection, output }: OptionSets): void {
  for (const which of ['pause', 'resume'] as const)
    connection(
      output(
        rollout
          .command(which)
          .summary(
            which === 'pause'
              ? 'pause a rollout in waves: it starts no node and no wave until resumed (the loops it started go on)'
              : 'resume a paused rollout in waves',
          )
          .argument('<rollout>', 'the rollout id, such as datum-rollout/gen-12/4-nodes-1a2b3c4d5e6f')
          .option('--by <who>', 'who asks (recorded by the rollout)')
          .option('--note <text>', 'why'),
      ),
    ).action((id, opts, cmd) =>
      inv.go(
        cmd,
        async () =>
          (await import('./commands/rollout-manage.js'))[which === 'pause' ? 'rolloutPauseCommand' : 'rolloutResumeCommand'],
        { id, ...opts },
      ),
    );
}
