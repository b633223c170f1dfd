import { withFix } from '../contract/fix';
import type { History } from '../contract/history';
import type { NodeHold } from '../contract/ledger';
import { echo } from './bounds';
import { msBetween } from './duration';
import { done, objectOf, type Checked } from './work-payloads';

/*
 * A hold (`datum hold NODE --by --reason [--until]`): a central, recorded, time-boxed stop of
 * repairs on a node. The loop goes on observing and reporting; drift is reported with the plan
 * and not applied (DRIFTED/HELD, a DRIFT_HELD condition per resource), and every ledger entry
 * while it lasts carries it. A step toward less trust, so any operator may take it from the
 * controller (no operator key: it narrows what Datum writes). Its end, by `datum unhold` or its
 * `until`, is a note, and the pass that follows repairs.
 */

const MAX_NAME = 200;
const MAX_REASON = 2000;

export interface HoldRequest {
  by: string;
  reason: string;
  until: string | null;
}

export interface UnholdRequest {
  by: string;
  note: string | null;
}

/** A hold's payload, judged at `now` (the workflow's clock): a name, a reason, and an `until` still ahead. */
export function parseHold(payload: unknown, now: string): Checked<HoldRequest> {
  const object = objectOf('hold', payload, ['by', 'reason', 'until']);
  if (!object.ok) return object;
  const p = object.value;
  const problems = [textProblem('by', p.by, MAX_NAME, 'say who holds the node, such as "oncall"')];
  problems.push(textProblem('reason', p.reason, MAX_REASON, 'say why, such as "disk swap CHG-1234"'));
  const until = p.until === undefined || p.until === null ? null : p.until;
  if (until !== null) {
    if (typeof until !== 'string' || Number.isNaN(Date.parse(until)))
      problems.push(`until ${echo(until)} ${withFix('is not a time', 'give an ISO 8601 time such as 2026-12-06T18:00:00Z')}`);
    else if (msBetween(now, until) <= 0)
      problems.push(`until ${echo(until)} ${withFix(`has passed already (it is ${now})`, 'give a time ahead, or no --until')}`);
  }
  const at = typeof until === 'string' ? Date.parse(until) : NaN;
  return done('hold', problems, {
    by: text(p.by),
    reason: text(p.reason),
    until: Number.isNaN(at) ? null : new Date(at).toISOString(),
  });
}

export function parseUnhold(payload: unknown): Checked<UnholdRequest> {
  const object = objectOf('unhold', payload, ['by', 'note']);
  if (!object.ok) return object;
  const p = object.value;
  const problems = [textProblem('by', p.by, MAX_NAME, 'say who ends the hold, such as "oncall"')];
  if (p.note !== undefined && p.note !== null && (typeof p.note !== 'string' || p.note.length > MAX_REASON))
    problems.push(`note ${withFix(`must be text of at most ${MAX_REASON} characters`, 'say why in a sentence or two')}`);
  return done('unhold', problems, { by: text(p.by), note: typeof p.note === 'string' ? p.note : null });
}

/** A checked text field, trimmed (the checks refuse anything else before it is used). */
const text = (value: unknown): string => (typeof value === 'string' ? value.trim() : '');

function textProblem(field: string, value: unknown, max: number, fix: string): string | null {
  if (typeof value === 'string' && value.trim().length > 0 && value.length <= max) return null;
  return `${field} ${echo(value)} ${withFix(`must be text of 1 to ${max} characters`, fix)}`;
}

/** The hold in force at `now`: one whose `until` has passed is over. */
export function holdInForce(hold: NodeHold | null | undefined, now: string): NodeHold | null {
  if (!hold) return null;
  return hold.until !== null && msBetween(now, hold.until) <= 0 ? null : hold;
}

/** The history with a hold placed (a second hold replaces the first: its words are the operator's latest). */
export const placeHold = (history: History, hold: NodeHold): History => ({ ...history, hold });

/** The history with no hold. */
export const liftHold = (history: History): History => ({ ...history, hold: null });

/** "held by oncall until 2026-12-06T18:00:00.000Z (disk swap)": how entries and conditions name a hold. */
export function holdWords(hold: NodeHold): string {
  return `held by ${hold.by}${hold.until ? ` until ${hold.until}` : ''} (${hold.reason})`;
}
