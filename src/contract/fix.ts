/*
 * Every message Datum writes for a person reads "<what is wrong> — fix: <what to do>". withFix
 * builds that shape everywhere (the schemas, the agent, the CLI, the activities, tracing), so
 * problemsFromZod (src/domain/errors.ts) can always cut a schema's message back into its problem
 * and its fix. A module with no imports: `datum --help` loads it, and so does every part.
 */
export const FIX = ' — fix: ';

/** "<problem> — fix: <fix>". */
export const withFix = (problem: string, fix: string): string => `${problem}${FIX}${fix}`;

/** One thing wrong with an input, in that shape: which field, what is wrong, and how to fix it. */
export interface Problem {
  /** Dotted path of the offending field, or "(file)" / "(payload)" for the input as a whole. */
  field: string;
  problem: string;
  fix: string;
}
