/*
 * The parse layer's checks, shared by the commands: commander has parsed the command line into
 * options; these turn option values into what a command needs, or a UsageError (exit 2) that
 * names the option and the fix. Loaded by a command's module, not by `datum --help`.
 */
import { DURATION_HINT, parseDuration } from '../domain/duration';
import { UsageError, withFix } from './errors';

export { UsageError } from './errors';

export const OUTPUT_FORMATS = ['text', 'json', 'jsonl'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** What every reading command takes: `-o FORMAT`, and `--json` as the alias scripts already use. */
export interface OutputFlags {
  output?: string;
  json?: boolean;
}

export function outputFormat(flags: OutputFlags): OutputFormat {
  if (flags.json && flags.output !== undefined && flags.output !== 'json')
    throw new UsageError(withFix(`--json and -o ${flags.output} disagree`, 'give one of them (--json is -o json)'));
  if (flags.json) return 'json';
  const format = flags.output ?? 'text';
  if (!(OUTPUT_FORMATS as readonly string[]).includes(format))
    throw new UsageError(withFix(`-o ${JSON.stringify(format)} is not an output format`, `use ${OUTPUT_FORMATS.join(', ')}`));
  return format as OutputFormat;
}

/** A duration option such as --timeout 10m or --since 1h, in milliseconds. */
export function durationFlag(text: string, flag: string): number {
  const ms = parseDuration(text);
  if (ms === null) throw new UsageError(withFix(`${flag} ${JSON.stringify(text)} is not a duration`, DURATION_HINT));
  return ms;
}

/** A whole number of 1 or more, such as --generation 12 or --limit 50. */
export function wholeFlag(text: string | undefined, flag: string, example: string): number {
  const n = Number(text);
  if (text === undefined || !/^\s*\d+\s*$/.test(text) || !Number.isSafeInteger(n) || n < 1)
    throw new UsageError(
      withFix(`${flag} must be a whole number of 1 or more, got ${JSON.stringify(text ?? null)}`, `such as ${flag} ${example}`),
    );
  return n;
}

/** A comma-separated list option (--nodes N-1,N-2, --status BLOCKED,CONFLICT), each item trimmed. */
export function listFlag(text: string | undefined): string[] {
  return text === undefined ? [] : text.split(',').map((s) => s.trim());
}

/** One of a closed set of values, each item of a list option checked. */
export function oneOf<T extends string>(values: string[], allowed: readonly T[], flag: string): T[] {
  const bad = values.filter((v) => !(allowed as readonly string[]).includes(v));
  if (bad.length > 0)
    throw new UsageError(
      withFix(`${flag} ${bad.map((b) => JSON.stringify(b)).join(', ')}: not known`, `use ${allowed.join(', ')}`),
    );
  return values as T[];
}
