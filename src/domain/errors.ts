import { withFix, type Problem } from '../contract/fix';

// "<what is wrong> — fix: <what to do>": the one shape (src/contract/fix.ts).
export { withFix, type Problem };

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
