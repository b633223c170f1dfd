/*
 * The `datum` command tree, declared once: parsing, `--help`, docs/cli.md (scripts/cli-docs)
 * and the shell completions (`datum completion`) all come from it, so none can drift from the
 * options a command takes.
 *
 * This module loads commander and nothing heavy: each command's module (and with it zod, the
 * Temporal client, the worker) is imported inside its action, so `datum --help` and
 * `datum --version` stay about as fast as `node -e 0` (bench/cli-start.mjs measures it).
 *
 * Command groups that grew large live in their own modules: program-work.ts, program-nodes.ts,
 * program-rollout.ts and program-agent.ts.
 */
import { Command, Option } from '@commander-js/extra-typings';
import type { CommandUnknownOpts, OptionValues } from '@commander-js/extra-typings';
import type { AgentInput, AgentRaw } from './commands/agent';
import { datumVersion, type CommandModule } from './command';
import { Invocation } from './invocation';
import { resetFenceCommandOn } from './program-agent';
import { workCommands, type OptionSets } from './program-work';
import { nodeCommands, operatorCommands } from './program-nodes';
import { rolloutCommands } from './program-rollout';

// ---------------------------------------------------------------------------------------------
// Option sets several commands share.

const CONNECTION = 'Temporal connection (flags win over the environment, which wins over the profile):';

/** The `temporal` CLI's connection flags, on top of envconfig. */
function connection<A extends unknown[], O extends OptionValues, G extends OptionValues>(command: Command<A, O, G>) {
  return command
    .addOption(
      new Option('--address <host:port>', 'Temporal frontend (env: TEMPORAL_ADDRESS; default localhost:7233)').helpGroup(
        CONNECTION,
      ),
    )
    .addOption(
      new Option('-n, --namespace <namespace>', 'namespace (env: TEMPORAL_NAMESPACE; default "default")').helpGroup(CONNECTION),
    )
    .addOption(new Option('--profile <name>', 'profile of the envconfig file (env: TEMPORAL_PROFILE)').helpGroup(CONNECTION))
    .addOption(
      new Option(
        '--config-file <path>',
        'envconfig TOML file (env: TEMPORAL_CONFIG_FILE; default ~/.config/temporalio/temporal.toml)',
      ).helpGroup(CONNECTION),
    )
    .addOption(
      new Option('--api-key <key>', 'API key, for Temporal Cloud (env: TEMPORAL_API_KEY; turns TLS on)').helpGroup(CONNECTION),
    )
    .addOption(new Option('--tls', 'connect with TLS (env: TEMPORAL_TLS)').helpGroup(CONNECTION))
    .addOption(
      new Option('--tls-cert-path <path>', 'client certificate (env: TEMPORAL_TLS_CLIENT_CERT_PATH)').helpGroup(CONNECTION),
    )
    .addOption(
      new Option('--tls-key-path <path>', 'client private key (env: TEMPORAL_TLS_CLIENT_KEY_PATH)').helpGroup(CONNECTION),
    )
    .addOption(
      new Option('--tls-ca-path <path>', 'server CA certificate (env: TEMPORAL_TLS_SERVER_CA_CERT_PATH)').helpGroup(CONNECTION),
    )
    .addOption(
      new Option('--tls-server-name <name>', 'server name to verify (env: TEMPORAL_TLS_SERVER_NAME)').helpGroup(CONNECTION),
    );
}

/** `-o text|json|jsonl` on every reading command, `--json` kept as the alias of `-o json`. */
function output<A extends unknown[], O extends OptionValues, G extends OptionValues>(command: Command<A, O, G>) {
  return command
    .addOption(
      new Option('-o, --output <format>', 'text (default), json (one document) or jsonl (one object a line)').choices([
        'text',
        'json',
        'jsonl',
      ] as const),
    )
    .addOption(new Option('--json', 'same as -o json'));
}

const fleetOption = () =>
  new Option('--fleet <dir>', 'fleet directory: desired/nodes/<node>.yaml, agents/, artifacts/').env('DATUM_FLEET');
const dataOption = () =>
  new Option('--data <dir>', "Datum's local state: the SQLite ledger, the dev server's database (default ./.datum)").env(
    'DATUM_DATA',
  );
// Read by src/worker/metrics.ts itself, so its errors can say whether the flag or the variable is wrong.
const metricsOption = () =>
  new Option(
    '--metrics-address <ip:port>',
    'serve Prometheus metrics at http://IP:PORT/metrics, "off" for none (env: DATUM_METRICS_ADDRESS)',
  );
// Read by src/worker/logging.ts itself (DATUM_LOG_LEVEL, DATUM_LOG_FORMAT when not given), the names the temporal CLI uses.
const logOptions = () => [
  new Option('--log-level <level>', 'trace, debug, info, warn, error or never (env: DATUM_LOG_LEVEL; default info)'),
  new Option('--log-format <format>', 'json or text (env: DATUM_LOG_FORMAT; default json)'),
];
const timeoutOption = (what: string) => new Option('--timeout <duration>', `how long to wait for ${what}, such as 90s or 10m`);
const selectorOption = (what: string) =>
  new Option(
    '--selector <selector>',
    `only ${what}: role=web,zone!=b by the labels desired state gives nodes (reads the fleet directory), or name=web-* by name`,
  );

const collect = (value: string, previous: string[]) => [...previous, value];

/**
 * `datum agent`'s options, help and action, on the `datum` tree's command or on `datum-agent`'s
 * own (src/cli/agent-main.ts, the packaged agent): declared once, so the two cannot drift. `load`
 * gives the command's module. The return type is declared: the inferred one (every option's
 * type) is costly for tsc to write out.
 */
export function agentCommandOn(
  command: Command,
  inv: Invocation,
  load: () => Promise<CommandModule<AgentRaw, AgentInput>>,
): CommandUnknownOpts {
  connection(
    command
      .summary('run the node agent for one or more agent.yaml files')
      .description(
        `Serves task queue datum-node-<node> for each agent.yaml: observes the node from the things themselves and applies only what its local config allows (mode, overrides). agent.yaml is re-read on every observation, so a new override or mode takes effect without a restart.`,
      )
      .option(
        '--config <path>',
        'an agent.yaml (repeat for each node this process serves); without it, /etc/datum/agent.yaml',
        collect,
        [] as string[],
      )
      .addOption(metricsOption())
      .addOption(logOptions()[0])
      .addOption(logOptions()[1])
      // The agent's own options stop at a subcommand's name: `reset-fence --config` is reset-fence's.
      .enablePositionalOptions(),
  ).action((opts, cmd) => inv.go(cmd, load, opts));
  resetFenceCommandOn(command, inv);
  return command;
}

/** The command groups in modules of their own (program-work.ts …) get these option sets as plain decorators. */
const OPTION_SETS: OptionSets = {
  connection: (command) => (connection(command), command),
  output: (command) => (output(command), command),
  timeoutOption,
  selectorOption,
  fleetOption,
};

// ---------------------------------------------------------------------------------------------
// The commands. Each action loads its module only when that command runs.

/** What runs: the dev stack, the controller worker, the node agent. */
/** The worker's --loop-shards and --serve-shards (src/contract/names.ts loopTaskQueue). */
function loopShardOptions(): [Option, Option] {
  return [
    new Option(
      '--loop-shards <n>',
      "how many shards the fleet's loops run in, 1 to 64: a node's loops run on datum-control-loops-<FNV-1a(node) mod n> (with 1, on datum-control; with --task-queue Q, on Q-loops-<k> and Q). Give every controller the same number (default 1)",
    ).env('DATUM_LOOP_SHARDS'),
    new Option(
      '--serve-shards <list>',
      'the loop shards this worker serves, such as 0,2 or 0-3 (default: all of them); every shard needs a worker somewhere',
    ).env('DATUM_SERVE_SHARDS'),
  ];
}

function runCommands(program: Program, inv: Invocation): void {
  program
    .command('dev')
    .summary('the whole stack on this machine: dev server + Web UI, controller, one agent per node, a first rollout')
    .description(
      `Starts \`temporal server start-dev\` (SQLite at DATA/temporal.sqlite, Web UI on --ui-port), a controller worker and one agent per FLEET/agents/*.yaml, then rolls out every node's desired generation once. Without --fleet it copies the bundled demo fleet (examples/fleet: five nodes, N-24 the seed's story, N-25 in observe mode) to DATA/fleet and roots the nodes in DATA/nodes. Ctrl-C stops every process it started; starting again resumes from DATA.`,
    )
    // Not bound to DATUM_FLEET: without --fleet, dev runs the bundled demo fleet.
    .option('--fleet <dir>', 'fleet directory (default: a copy of the demo fleet in DATA/fleet)')
    .option('--port <port>', 'dev server frontend port', '7233')
    .option('--ui-port <port>', 'Web UI port', '8233')
    .addOption(dataOption())
    .action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/dev.js')).devCommand, opts));

  connection(
    program
      .command('worker')
      .summary('run the controller worker (reconcileNode, rollout) on datum-control')
      .description(
        `Runs the controller worker on task queue datum-control; the authority is FLEET/desired. Run as many as you like: they share the task queue. With --loop-shards, loops run on one queue per shard and the worker serves those too (--serve-shards splits them between workers). --task-queue runs a separate controller (a staging copy of the authority, say). Decisions are appended to the ledger at $DATUM_LEDGER_URL (postgres://…) or else DATA/ledger.sqlite.`,
      )
      .addOption(fleetOption())
      .addOption(dataOption())
      .option('--task-queue <queue>', 'task queue to serve (default datum-control)')
      .addOption(loopShardOptions()[0])
      .addOption(loopShardOptions()[1])
      .addOption(
        new Option(
          '--max-cached-workflows <n>',
          "loops kept in this worker's memory between passes, about 0.3 MB each (docs/performance.md); an evicted loop is replayed when it wakes; checked against the loops running (default: as many as fit the heap, at 0.5 MB a loop)",
        ).env('DATUM_MAX_CACHED_WORKFLOWS'),
      )
      .addOption(metricsOption())
      .addOption(logOptions()[0])
      .addOption(logOptions()[1]),
  ).action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/worker.js')).workerCommand, opts));

  agentCommandOn(program.command('agent'), inv, async () => (await import('./commands/agent.js')).agentCommand);

  program
    .command('codec-server')
    .summary('decrypt payloads for the Web UI and the temporal CLI (the payload codec server)')
    .description(
      `Serves the Temporal codec server protocol (POST /decode and /encode) with the keyring in $DATUM_CODEC_KEYS, for callers with the bearer token in $DATUM_CODEC_SERVER_TOKEN (or _TOKEN_FILE) from the origins in $DATUM_CODEC_SERVER_ORIGINS, on $DATUM_CODEC_SERVER_ADDRESS (default 127.0.0.1:8888). Point the Web UI's codec endpoint (or \`temporal --codec-endpoint\`) at it. Runs until Ctrl-C.`,
    )
    .action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/codec-server.js')).codecServerCommand, opts));

  rolloutCommands(program, inv, OPTION_SETS);
  readingCommands(program, inv);
  operatorCommands(program, inv, OPTION_SETS);
  nodeCommands(program, inv, OPTION_SETS);
  workCommands(program, inv, OPTION_SETS);
  checkCommands(program, inv);
  signCommand(program, inv);
  importCommand(program, inv);
}

/** What the fleet is doing: status, nodes, describe, and the ledger. */
function readingCommands(program: Program, inv: Invocation): void {
  connection(
    output(
      program
        .command('status')
        .summary('open conditions across the fleet (empty, and watched, means the fleet is right)')
        .description(
          `Lists every open condition: each running reconcile loop's, and the fleet's own from the fleet workflow's view (datum-fleet on datum-control): a declared node with no running loop (NO_RUNNING_LOOP: never rolled out, or how its last loop ended and when), a loop that has not verified its node within its policy's bound (VERIFICATION_OVERDUE), a loop for a node the authority no longer declares (NO_DESIRED_STATE), a loop on a loop shard's queue that no controller worker polls (LOOP_QUEUE_UNSERVED). What is wrong, on which node and resource, since when, what was tried and who can resolve it. Needs no fleet directory; --fleet (or DATUM_FLEET) looks at that directory instead of reading the fleet workflow's view. The fleet is right only when nothing is open, every declared node was verified within its bound, and someone watches: a controller polls datum-control and the fleet workflow looked within its interval. Exit code 0 when right, 1 when something is open or not verified, 3 when the fleet is unwatched.`,
        )
        .option(
          '--condition <types>',
          'only these condition types, comma-separated (such as CONFLICTING_WRITER or NO_RUNNING_LOOP)',
        )
        .addOption(selectorOption('the conditions of the nodes it selects'))
        .addOption(fleetOption())
        .option('--watch', 'after the report, print each condition as it opens or closes, until Ctrl-C')
        .option('--interval <duration>', 'how often --watch looks (default 2s)'),
    ),
  ).action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/status.js')).statusCommand, opts));

  connection(
    output(
      program
        .command('nodes')
        .summary('the fleet at a glance: one line per node, from Temporal visibility alone')
        .description(
          `One paginated visibility list of the running reconcile loops (no query per node): NODE, STATUS, REASON, GEN, MODE, CONDITIONS, LAST VERIFIED (as the loop last reported it, at most 5 minutes behind) and AGE. Each declared node with no running loop is a NO LOOP row, from the fleet workflow's view (or --fleet DIR's): REASON says how its last loop ended (or that it was never rolled out), AGE since when. Exit code 3, with a line saying since when, when the fleet is unwatched.`,
        )
        .option('--status <statuses>', 'only these statuses, comma-separated (such as BLOCKED,CONFLICT)')
        .option('--condition <types>', 'only nodes with one of these open conditions, comma-separated')
        .option('--generation <G>', 'only loops at this generation')
        .addOption(selectorOption('the nodes it selects'))
        .addOption(fleetOption()),
    ),
  ).action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/nodes.js')).nodesCommand, opts));

  connection(
    output(
      program
        .command('describe')
        .summary('explain one node: its decision, its conditions, its last ledger entries')
        .argument('<node>', 'the node, such as N-24'),
    ),
  ).action((node, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/describe.js')).describeCommand, { node, ...opts }),
  );
  ledgerCommand(program, inv);
}

/** A node's ledger from the store. */
function ledgerCommand(program: Program, inv: Invocation): void {
  output(
    program
      .command('ledger')
      .summary("a node's ledger from the store (every decision, across generations and continue-as-new)")
      .description(
        `Reads the ledger store: $DATUM_LEDGER_URL (postgres://…) or DATA/ledger.sqlite. Oldest first; --limit keeps the newest N of them.`,
      )
      .argument('<node>', 'the node, such as N-24')
      .option(
        '--since <time>',
        'entries decided since TIME: ISO 8601 (2026-11-29T10:00:00Z, 2026-11-29) or a duration ago (90m, 1h, 2d)',
      )
      .option('--limit <n>', 'only the newest N entries')
      .option('--follow', 'then print each new entry as the store takes it, until Ctrl-C')
      .addOption(dataOption()),
  ).action((node, opts, cmd) => inv.go(cmd, async () => (await import('./commands/ledger.js')).ledgerCommand, { node, ...opts }));
}

/** `datum import`: desired state for a node as it is, read by its agent. */
function importCommand(program: Program, inv: Invocation): void {
  connection(
    output(
      program
        .command('import')
        .summary('desired state for a node as it is now, read by its agent (an observe, no write)')
        .description(
          `Asks NODE's agent to read each RESOURCE (KEY=TYPE:NAME, as targets are spelled: web=unit:nginx.service, pkg=package:nginx, conf=file:etc/app.conf, data=directory:srv/data) and every flag under flags/, and prints the desired-state YAML that declares exactly what is there. With --fleet, the node's current desired resources are read too, its policy kept, and a package's .deb kept where the node still has that version. The YAML validates as it is (datum validate), and a first observe pass from it finds no drift. What cannot be declared (nothing there, binary content, a release) is named in a comment; exit code 1 then.`,
        )
        .argument('<node>', 'the node, such as N-24')
        .argument('[resources...]', 'KEY=TYPE:NAME, one per resource to declare')
        .option(
          '--generation <G>',
          "the generation the printed file declares (default 1; with --fleet, the node's generation there + 1)",
        )
        .option('--no-flags', 'leave out the flags found under flags/')
        .addOption(fleetOption())
        .addOption(timeoutOption('an agent of the node to take the read (default 30s)')),
    ),
  ).action((node, resources, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/import.js')).importCommand, { node, resources, ...opts }),
  );
}

/** `datum sign`: the desired-state author's side of the trust anchors. */
function signCommand(program: Program, inv: Invocation): void {
  output(
    program
      .command('sign')
      .summary("sign a node's desired-state file for hosts that require signed intent")
      .description(
        `Signs FILE (desired/nodes/<node>.yaml) with KEY, an Ed25519 private key, through ssh-keygen -Y sign -n datum-desired (a passphrase or an ssh-agent work as for git), and writes the detached signature to FILE.sig, which the controller carries to the node with the file's exact bytes. FILE must validate as its node's desired state first, and the signature is verified as a host verifies it before FILE.sig is written; nothing is written otherwise. Which keys a host accepts is its agent.yaml's trust.desired (docs/configuration.md, "Trust anchors"). Sign again after every edit; then datum refresh NODE for a running loop. Exit code 0 when signed, 1 otherwise.`,
      )
      .argument('<file>', 'the desired-state file to sign, such as desired/nodes/N-24.yaml')
      .requiredOption('--key <private key>', 'the Ed25519 private key to sign with (its .pub next to it names it in the output)'),
  ).action((file, opts, cmd) => inv.go(cmd, async () => (await import('./commands/sign.js')).signCommand, { file, ...opts }));
}

function checkCommands(program: Program, inv: Invocation): void {
  output(
    program
      .command('validate')
      .summary('check desired-state and agent.yaml files offline, before they are merged')
      .description(
        `Checks each FILE (or every file of FLEET: desired/nodes/*.yaml and agents/*.yaml; with neither, /etc/datum/agent.yaml) against the schemas the controller and the agent use, with no Temporal and no node. A desired-state file whose node's agent.yaml is in the fleet (agents/<node>.yaml) and requires or lists signing keys (trust) has its .sig checked as that host checks it: unsigned, signed by a key it does not list, changed after signing, or past its expires is a problem. An agent.yaml may name its node with node: or with host: (seed 001's spelling); a valid one that used host: is reported with the spelling read (--json reports it for every agent.yaml). Every problem names the file, the line, the field and the fix. Exit code 0 when every file is valid, 1 when one is not. Meant as a CI step in the fleet's repository.`,
      )
      .argument('[files...]', 'desired-state files (desired/nodes/<node>.yaml) and agent.yaml files')
      .addOption(fleetOption()),
  ).action((files, opts, cmd) =>
    inv.go(cmd, async () => (await import('./commands/validate.js')).validateCommand, { files, ...opts }),
  );

  output(
    program
      .command('diff')
      .summary("what a rollout would do to a node, from the node's last fresh observation")
      .description(
        `Plans generation G (default: the authority's) against the last fresh observation in the node's ledger: per resource the ownership, mode and planned action, with the same domain code a pass runs. Says plainly when that observation is older than observation_ttl (a rollout observes again first). Exit code 0 when nothing would change, 1 when something would.`,
      )
      .argument('<node>', 'the node, such as N-24')
      .option('--generation <G>', 'plan this generation (default: the one in FLEET/desired/nodes/NODE.yaml)')
      .addOption(fleetOption())
      .addOption(dataOption()),
  ).action((node, opts, cmd) => inv.go(cmd, async () => (await import('./commands/diff.js')).diffCommand, { node, ...opts }));

  program
    .command('completion')
    .summary('print a shell completion script (bash, zsh or fish)')
    .description(
      `Prints a completion script generated from this command tree. Install it with
  bash: datum completion bash > /etc/bash_completion.d/datum   (or: source <(datum completion bash))
  zsh:  datum completion zsh > "\${fpath[1]}/_datum"
  fish: datum completion fish > ~/.config/fish/completions/datum.fish`,
    )
    .argument('<shell>', 'bash, zsh or fish')
    .action((shell, _opts, cmd) =>
      inv.go(cmd, async () => (await import('./commands/completion.js')).completionCommand, {
        shell,
        tree: cmd.parent ?? cmd,
      }),
    );

  output(
    program
      .command('webui-view')
      .summary("Datum's saved views and columns for the Temporal Web UI's workflow list")
      .description(
        `Prints a bookmarklet (and the same script for the browser console) that adds the Datum search attributes as columns of the workflow list and saved views for the loops, the loops that need attention and the rollouts, in the browser's storage for that Web UI and namespace (the UI keeps both there, not on the server); then the UI's share link and query of each view. Contacts nothing.`,
      )
      .option('--ui-url <url>', 'the Web UI as the browser opens it', 'http://127.0.0.1:8233')
      .option('-n, --namespace <namespace>', 'namespace (env: TEMPORAL_NAMESPACE; default "default")'),
  ).action((opts, cmd) => inv.go(cmd, async () => (await import('./commands/webui-view.js')).webUiViewCommand, opts));
}

const newProgram = () => new Command('datum');
type Program = ReturnType<typeof newProgram>;

/** The whole tree, for one invocation. */
export function buildProgram(inv: Invocation = new Invocation()): CommandUnknownOpts {
  const program = newProgram()
    .description('Keeps every node of a fleet at its declared desired state and proves it, on Temporal.')
    .version(`datum ${datumVersion()}`, '-V, --version', 'print the version')
    .helpCommand('help [command]', 'help for a command')
    .showSuggestionAfterError(true)
    // A command's options are its own: `datum agent reset-fence --config` is reset-fence's, not the agent's.
    .enablePositionalOptions()
    .addHelpText(
      'after',
      `
Temporal: envconfig (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE) or the
connection flags of each command. \`datum <command> --help\` for a command's options; docs/cli.md has them all.`,
    );
  runCommands(program, inv);
  return program;
}
