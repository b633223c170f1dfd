/** Durations in desired state and the ledger are strings like "60s", "5m", "1h30m" or "250ms". */
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const isUnit = (u: string | undefined): u is keyof typeof UNIT_MS => u !== undefined && Object.hasOwn(UNIT_MS, u);
const WHOLE = /^(?:\d+(?:ms|s|m|h|d))+$/;
const PART = /(\d+)(ms|s|m|h|d)/g;

export const DURATION_HINT = 'write a number followed by a unit (ms, s, m, h or d), for example "60s", "5m" or "1h30m"';

/** Milliseconds of a duration string, or null when the string is not a duration. */
export function parseDuration(text: string): number | null {
  if (typeof text !== 'string' || !WHOLE.test(text)) return null;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(PART)) {
    if (!isUnit(unit)) return null;
    total += Number(amount) * UNIT_MS[unit];
  }
  return Number.isSafeInteger(total) ? total : null;
}

export function durationMs(text: string): number {
  const ms = parseDuration(text);
  if (ms === null) throw new RangeError(`"${text}" is not a duration: ${DURATION_HINT}`);
  return ms;
}

/** The one spelling a duration is stored under, so "1m" and "60s" bind the same digest. */
export function formatDuration(ms: number): string {
  if (ms % 1000 !== 0) return `${ms}ms`;
  return `${ms / 1000}s`;
}

export function addMs(iso: string, ms: number): string {
  return new Date(Date.parse(iso) + ms).toISOString();
}

export function msBetween(fromIso: string, toIso: string): number {
  return Date.parse(toIso) - Date.parse(fromIso);
}
