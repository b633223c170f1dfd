import { CommanderError } from '@commander-js/extra-typings';
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { EXIT, UsageError, withFix } from './errors';
import { Invocation } from './invocation';
import { buildProgram } from './program';
import { terminalSafe } from './output';

/** The command an error belongs to, as commander reports it (an error names no command itself). */
interface ErrorSite {
  command: CommandUnknownOpts | null;
}

/**
 * Every command of the tree throws instead of exiting, and hands its error message here instead
 * of printing it: main prints it once, in Datum's "<problem> — fix: <fix>" shape, with the usage.
 */
export function interceptErrors(program: CommandUnknownOpts, quiet = false): ErrorSite {
  const site: ErrorSite = { command: null };
  const visit = (command: CommandUnknownOpts) => {
    command.exitOverride();
    command.configureOutput({
      outputError: () => {
        site.command = command;
      },
      ...(quiet ? { writeOut: () => undefined, writeErr: () => undefined } : {}),
    });
    for (const sub of command.commands) visit(sub);
  };
  visit(program);
  return site;
}

export async function main(argv: string[]): Promise<number> {
  const inv = new Invocation();
  return runProgram(buildProgram(inv), inv, argv);
}

/** Parses and runs `argv` on a command tree whose actions go through `inv`; the exit code. */
export async function runProgram(program: CommandUnknownOpts, inv: Invocation, argv: string[]): Promise<number> {
  const site = interceptErrors(program);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return inv.code;
  } catch (error) {
    return report(error, site.command ?? inv.command ?? program);
  }
}

function report(error: unknown, command: CommandUnknownOpts): number {
  if (error instanceof CommanderError) {
    // --help and --version end as "errors" once exits are overridden.
    if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version') return EXIT.ok;
    // A command that needs a subcommand, given none: its help went to stderr.
    if (error.code === 'commander.help') return EXIT.usage;
    process.stderr.write(terminalSafe(`${commandPath(command)}: ${commanderProblem(error, command)}\n\n${usageOf(command)}\n`));
    return EXIT.usage;
  }
  if (error instanceof UsageError) {
    process.stderr.write(terminalSafe(`${commandPath(command)}: ${error.message}\n\n${usageOf(command)}\n`));
    return EXIT.usage;
  }
  process.stderr.write(terminalSafe(`${commandPath(command)}: ${withCauses(error)}\n`));
  return EXIT.finding;
}

/**
 * An error's message with what caused it: the client's "Failed to start Workflow" says nothing
 * without the server's reason in its cause (a refused start, an unreachable frontend).
 */
function withCauses(error: unknown): string {
  const said: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    const message = e instanceof Error ? e.message : typeof e === 'string' ? e : JSON.stringify(e);
    if (message && !said.some((s) => s.includes(message))) said.push(message);
    e = e instanceof Error ? e.cause : undefined;
  }
  return said.join(': ');
}

export function commandPath(command: CommandUnknownOpts): string {
  const names: string[] = [];
  for (let c: CommandUnknownOpts | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

export function usageOf(command: CommandUnknownOpts): string {
  const path = commandPath(command);
  return `Usage: ${path} ${command.usage()}\nRun \`${path} --help\` for every option.`;
}

/** What each kind of commander error asks the operator to do. */
const COMMANDER_FIXES: Record<string, (path: string) => string> = {
  'commander.unknownOption': (path) => `remove it or correct its spelling (\`${path} --help\` lists the options)`,
  'commander.unknownCommand': (path) => `\`${path} --help\` lists the commands`,
  'commander.missingArgument': () => 'give it, as the usage below shows',
  'commander.optionMissingArgument': () =>
    'give the option its value (--name VALUE, or --name=-VALUE for one that starts with "-")',
  'commander.missingMandatoryOptionValue': () => 'give the option, as the usage below shows',
  'commander.excessArguments': () => 'remove it, or pass it as the value of an option',
  'commander.invalidArgument': () => 'use one of the values it names',
  'commander.conflictingOption': () => 'give only one of them',
};

/**
 * Commander's message ("error: unknown option '--jsn'\n(Did you mean --json?)") in Datum's shape:
 * the problem, and a fix that carries commander's "did you mean" suggestion when it has one.
 */
export function commanderProblem(error: CommanderError, command: CommandUnknownOpts): string {
  const [first, ...rest] = error.message.replace(/^error: /, '').split('\n');
  const problem = first.replace(/'([^']*)'/g, '"$1"').replace(/\.$/, '');
  const suggestion = /\(Did you mean (.+)\?\)/.exec(rest.join(' '))?.[1];
  const fix = (COMMANDER_FIXES[error.code] ?? (() => `see \`${commandPath(command)} --help\``))(commandPath(command));
  return withFix(problem, suggestion ? `did you mean ${suggestion}? Otherwise ${fix}` : fix);
}

/**
 * The parse layer alone, in-process (test/fuzz/cli.test.ts): argv → the checked input a command
 * would run with, or a UsageError naming the option and the fix. Nothing connects or starts.
 * `--help` parses to `{ help: true }`.
 */
export async function parseOnly(argv: string[]): Promise<unknown> {
  const inv = new Invocation(true);
  const program = buildProgram(inv);
  const site = interceptErrors(program, true);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return inv.parsed;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.help') return { help: true };
      throw new UsageError(commanderProblem(error, site.command ?? program));
    }
    throw error;
  }
}
