import { expect } from 'vitest';
import { FIX } from '../../src/contract';
import type { InvalidInputError } from '../../src/domain';
import type { Case } from './generators';

export const PROVENANCE = { revision: 'rev', author: null, loaded_at: '2026-12-01T00:00:00.000Z' };

/** The parse's outcome: the value, or the typed error; anything else thrown fails the case. */
export function outcome(parse: () => unknown, type: new (...a: never[]) => InvalidInputError) {
  try {
    return { ok: true as const, value: parse() };
  } catch (error) {
    // The typed outcome only: anything else (a RangeError, a ReferenceError, a TypeError) fails the case.
    if (!(error instanceof type)) throw new Error(`untyped error: ${String(error)}`, { cause: error });
    return { ok: false as const, error };
  }
}

/** A rejection names the file, and every problem a field and a fix (the case's field when it has one). */
export function checkRejection(c: Case, error: InvalidInputError, source: string, what: string): void {
  expect(error.message.startsWith(`${source}: invalid ${what}; nothing from this file was applied:`)).toBe(true);
  expect(error.problems.length).toBeGreaterThan(0);
  for (const p of error.problems) {
    expect(p.field.length).toBeGreaterThan(0);
    expect(p.fix.length).toBeGreaterThan(0);
  }
  expect(error.message).toContain(FIX);
  if (c.field) expect(error.problems.map((p) => p.field)).toContainEqual(expect.stringContaining(c.field));
}
