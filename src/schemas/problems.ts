import type { z } from 'zod';
import { FIX, type Problem } from '../contract/fix';

/*
 * zod's issues as problems a person can act on ("<field>: <problem> — fix: <fix>"). Every message
 * the schemas write has the withFix shape, so it is cut back into its problem and its fix; zod's
 * own messages (a missing field, a wrong type, an unknown key) get Datum's wording here.
 */

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
    return { field, problem: issue.message, fix: 'correct the value as docs/configuration.md describes' };
  });
}
