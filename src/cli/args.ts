import { parseArgs, type ParseArgsConfig } from 'node:util';
import { withFix } from '../contract';

/** A usage error: printed to stderr with the command's usage, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export type Options = NonNullable<ParseArgsConfig['options']>;

export function parse<O extends Options>(argv: string[], options: O, allowPositionals = false) {
  try {
    return parseArgs({
      args: argv,
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals,
      strict: true,
    });
  } catch (error) {
    const message = (error as Error).message.replace(/^TypeError \[[A-Z_]+\]: /, '').split('\n')[0];
    const code = (error as { code?: unknown }).code;
    throw new UsageError(withFix(message, PARSE_FIXES[String(code)] ?? 'see --help for the options this command takes'));
  }
}

/** node:util parseArgs says what is wrong; these say what to do about it. */
const PARSE_FIXES: Record<string, string> = {
  ERR_PARSE_ARGS_UNKNOWN_OPTION: 'remove it or correct its spelling (--help lists the options)',
  ERR_PARSE_ARGS_INVALID_OPTION_VALUE:
    'give a value option its value (--name VALUE, or --name=-VALUE for one that starts with "-"), and a flag none',
  ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL: 'remove it, or pass it as the value of an option (--help lists them)',
};

/** TEMPORAL_ADDRESS / profiles come from envconfig; these flags override them per command. */
export const CONNECTION_OPTIONS = {
  address: { type: 'string' },
  namespace: { type: 'string' },
} as const satisfies Options;
