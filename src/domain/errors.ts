import type { z } from 'zod';
import { FIX, withFix } from '../contract/fix';

// "<what is wrong> — fix: <what to do>": the one shape (src/contract/fix.ts).
export { FIX, withFix };

export interface Problem {
  /** Dotted path of the offending field, or "(file)" for the document as a whole. */
  field: string;
  problem: string;
  fix: string;
}

/**
 * A file Datum was given that it cannot use. The message names the file, each field, what is
 * wrong with it and how to fix it; nothing is applied from a file that raised this.
 */
export class InvalidInputError extends Error {
  constructor(
    readonly file: string,
    readonly what: string,
    readonly problems: Problem[],
  ) {
    super(formatProblems(file, what, problems));
  }
}

/** The node's desired-state file is unusable; name kept stable as a Temporal failure type. */
export class InvalidDesiredState extends InvalidInputError {
  override readonly name = 'InvalidDesiredState';
  constructor(file: string, problems: Problem[]) {
    super(file, 'desired state', problems);
  }
}

export class InvalidAgentConfig extends InvalidInputError {
  override readonly name = 'InvalidAgentConfig';
  constructor(file: string, problems: Problem[]) {
    super(file, 'agent config', problems);
  }
}

/** One problem as a line of a list: "  - <field>: <problem> — fix: <fix>". */
export const problemLine = (p: Problem): string => withFix(`  - ${p.field}: ${p.problem}`, p.fix);

export function formatProblems(file: string, what: string, problems: Problem[]): string {
  const lines = problems.map(problemLine);
  return `${file}: invalid ${what}; nothing from this file was applied:\n${lines.join('\n')}`;
}

export function fieldPath(path: ReadonlyArray<PropertyKey>, prefix: ReadonlyArray<PropertyKey> = []): string {
  const all = [...prefix, ...path];
  if (all.length === 0) return '(file)';
  return all.reduce<string>(
    (acc, seg) => (typeof seg === 'number' ? `${acc}[${seg}]` : acc ? `${acc}.${String(seg)}` : String(seg)),
    '',
  );
}

/** Turns zod's issues into problems a person can act on. */
export function problemsFromZod(error: z.ZodError, prefix: ReadonlyArray<PropertyKey> = []): Problem[] {
  return error.issues.map((issue) => {
    const field = fieldPath(issue.path, prefix);
    // A bad record key: what is wrong with the key says more than the record's own message.
    const message = (issue.code === 'invalid_key' ? issue.issues[0]?.message : undefined) ?? issue.message;
    const cut = message.indexOf(FIX);
    if (cut >= 0) return { field, problem: message.slice(0, cut), fix: message.slice(cut + FIX.length) };
    if (issue.code === 'invalid_type' && (issue as { input?: unknown }).input === undefined) {
      return { field, problem: 'is missing', fix: `add ${field.split('.').pop() ?? field} (expected ${issue.expected})` };
    }
    if (issue.code === 'unrecognized_keys') {
      const keys = issue.keys.map((k) => `"${k}"`).join(', ');
      return {
        field,
        problem: `has unknown field${issue.keys.length > 1 ? 's' : ''} ${keys}`,
        fix: 'remove it or correct its spelling',
      };
    }
    if (issue.code === 'invalid_type')
      return { field, problem: `must be ${issue.expected}`, fix: `write a ${issue.expected} value` };
    return { field, problem: issue.message, fix: 'correct the value as the configuration reference in README.md describes' };
  });
}
