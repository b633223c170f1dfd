import { parseArgs, type ParseArgsConfig } from 'node:util';

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
    throw new UsageError((error as Error).message.replace(/^TypeError \[[A-Z_]+\]: /, ''));
  }
}

/** TEMPORAL_ADDRESS / profiles come from envconfig; these flags override them per command. */
export const CONNECTION_OPTIONS = {
  address: { type: 'string' },
  namespace: { type: 'string' },
} as const satisfies Options;
