import { UsageError } from './args';
import { agentCommand } from './commands/agent';
import { describeCommand } from './commands/describe';
import { devCommand } from './commands/dev';
import { ledgerCommand } from './commands/ledger';
import { refreshCommand } from './commands/refresh';
import { resolveCommand } from './commands/resolve';
import { rolloutCommand } from './commands/rollout';
import { statusCommand } from './commands/status';
import { workerCommand } from './commands/worker';

export interface Command {
  summary: string;
  usage: string;
  run(argv: string[]): Promise<number>;
}

const COMMANDS: Record<string, Command> = {
  dev: devCommand,
  worker: workerCommand,
  agent: agentCommand,
  rollout: rolloutCommand,
  status: statusCommand,
  describe: describeCommand,
  ledger: ledgerCommand,
  resolve: resolveCommand,
  refresh: refreshCommand,
};

const USAGE = () =>
  [
    'usage: datum <command> [options]',
    '',
    'commands:',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`),
    '',
    'Temporal connection: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE',
    '(envconfig), or --address/--namespace on each command. `datum <command> --help` for details.',
  ].join('\n');

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${USAGE()}\n`);
    return name ? 0 : 2;
  }
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`datum: unknown command "${name}"\n\n${USAGE()}\n`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(`${command.usage}\n`);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`datum ${name}: ${error.message}\n\n${command.usage}\n`);
      return 2;
    }
    process.stderr.write(`datum ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}
