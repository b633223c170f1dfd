import {
  RESOLUTION_KINDS,
  WORK_LEASE_DEFAULT,
  WORK_LEASE_MAX,
  type ClaimPayload,
  type LoopResolution,
  type ReleasePayload,
  type ResolutionKind,
  type ResolvePayload,
  type WorkEpisode,
  workItemId,
} from '../contract/work';
import { withFix } from '../contract/fix';
import { OPERATOR_SIGNATURE_FIX, operatorSignatureProblem, type OperatorSignature } from '../contract/trust';
import { breachProblem, clip, echo, jsonBreach } from './bounds';
import { DURATION_HINT, parseDuration } from './duration';
import { isWorkCondition } from './work-rules';

/*
 * The work item's Update payloads, checked by plain guards (no schema library: the work item's
 * workflow code loads none). A bad payload is refused by the Update's validator before anything
 * is recorded; each problem says what is wrong and how to fix it.
 */

export type Checked<T> = { ok: true; value: T } | { ok: false; error: string };

/** Who resolves: a name a person recognises, as the ledger records it. */
const MAX_NAME = 200;
const MAX_NOTE = 2000;
const CAPS = { depth: 3, chars: 8192, values: 8192 } as const;

const LEASE_MAX_MS = parseDuration(WORK_LEASE_MAX)!;

export interface CheckedClaim {
  by: string;
  lease_ms: number;
}

export function parseClaim(payload: unknown): Checked<CheckedClaim> {
  const object = objectOf('claim', payload, ['by', 'lease']);
  if (!object.ok) return object;
  const p = object.value as Partial<ClaimPayload>;
  const problems = [nameProblem(p.by)];
  const lease =
    p.lease === undefined ? parseDuration(WORK_LEASE_DEFAULT) : typeof p.lease === 'string' ? parseDuration(p.lease) : null;
  if (lease === null) problems.push(`lease ${echo(p.lease)} ${withFix('is not a duration', DURATION_HINT)}`);
  else if (lease < 1000 || lease > LEASE_MAX_MS)
    problems.push(
      `lease ${echo(p.lease)} ${withFix(`must be from 1s to ${WORK_LEASE_MAX}`, 'claim for less, and claim again to renew')}`,
    );
  return done('claim', problems, { by: p.by as string, lease_ms: lease ?? 0 });
}

export function parseRelease(payload: unknown): Checked<ReleasePayload> {
  const object = objectOf('release', payload, ['by']);
  if (!object.ok) return object;
  const p = object.value as Partial<ReleasePayload>;
  return done('release', [nameProblem(p.by)], { by: p.by as string });
}

export interface CheckedResolve {
  resolution: ResolutionKind;
  by: string;
  note: string | null;
  attempts: number | null;
  /** The episode the resolver judged (its claim's, or what `datum work show` showed); null when not given. */
  episode: WorkEpisode | null;
  /** The resolver's operator signature, unopened: the node's agent verifies it. */
  operator: OperatorSignature | null;
}

export function parseResolve(payload: unknown): Checked<CheckedResolve> {
  const object = objectOf('resolve', payload, ['resolution', 'by', 'note', 'attempts', 'episode', 'operator']);
  if (!object.ok) return object;
  const p = object.value as Partial<ResolvePayload>;
  const problems = [nameProblem(p.by)];
  if (!RESOLUTION_KINDS.includes(p.resolution as ResolutionKind))
    problems.push(
      `resolution ${echo(p.resolution)} ${withFix('is not a resolution', `use one of ${RESOLUTION_KINDS.join(', ')}; \`datum work show ID\` lists the ones this item allows`)}`,
    );
  if (p.note !== undefined && p.note !== null && (typeof p.note !== 'string' || p.note.length > MAX_NOTE))
    problems.push(`note ${withFix(`must be text of at most ${MAX_NOTE} characters`, 'say why in a sentence or two')}`);
  if (p.resolution === 'grant' && (!Number.isInteger(p.attempts) || (p.attempts as number) < 1))
    problems.push(
      `attempts ${echo(p.attempts)} ${withFix('must be a whole number of 1 or more for grant', 'grant --attempts 2, say')}`,
    );
  if (p.resolution !== 'grant' && p.attempts !== undefined)
    problems.push(`attempts ${withFix('goes with grant only', 'leave it out')}`);
  const episode = p.episode === undefined || p.episode === null ? null : episodeOf(p.episode);
  if (episode === 'invalid')
    problems.push(
      `episode ${withFix('is not an episode as an item gives it', 'send the `episode` of the item (its claim, or `datum work show --json`), or leave it out')}`,
    );
  const signed = signatureOf(p.operator);
  if ('problem' in signed) problems.push(signed.problem);
  return done('resolve', problems, {
    resolution: p.resolution as ResolutionKind,
    by: p.by as string,
    note: p.note ?? null,
    attempts: p.resolution === 'grant' ? (p.attempts as number) : null,
    episode: episode === 'invalid' ? null : episode,
    operator: 'problem' in signed ? null : signed.operator,
  });
}

/** The operator signature a resolution carries, unopened (the node's agent verifies it), or what is wrong with its shape. */
function signatureOf(value: unknown): { operator: OperatorSignature | null } | { problem: string } {
  const problem = operatorSignatureProblem(value);
  if (problem) return { problem: `operator ${withFix(problem, OPERATOR_SIGNATURE_FIX)}` };
  return { operator: (value as OperatorSignature | null | undefined) ?? null };
}

export function objectOf(name: string, payload: unknown, fields: string[]): Checked<Record<string, unknown>> {
  const breach = jsonBreach(payload, CAPS);
  if (breach)
    return {
      ok: false,
      error: `${name} payload rejected: ${withFix(`${breach.field} ${breachProblem(breach)}`, 'send a flat JSON object')}`,
    };
  if (!payload || typeof payload !== 'object' || Array.isArray(payload))
    return {
      ok: false,
      error: `${name} payload ${echo(payload)} rejected: ${withFix('it is not an object', `send {${fields.map((f) => `"${f}": …`).join(', ')}}`)}`,
    };
  const unknown = Object.keys(payload).filter((k) => !fields.includes(k));
  if (unknown.length > 0)
    return {
      ok: false,
      error: `${name} payload rejected: ${withFix(`unknown field(s) ${unknown.map((k) => clip(k, 40)).join(', ')}`, `use only ${fields.join(', ')}`)}`,
    };
  return { ok: true, value: payload as Record<string, unknown> };
}

function nameProblem(by: unknown): string | null {
  if (typeof by === 'string' && by.trim().length > 0 && by.length <= MAX_NAME) return null;
  return `by ${echo(by)} ${withFix(`must name who resolves (1 to ${MAX_NAME} characters)`, 'say who you are, such as "oncall" or "resolver-bot"')}`;
}

export function done<T>(name: string, problems: Array<string | null>, value: T): Checked<T> {
  const found = problems.filter((p): p is string => p !== null);
  return found.length === 0 ? { ok: true, value } : { ok: false, error: `${name} refused: ${found.join('; ')}` };
}

/**
 * reconcileNode's resolveWork payload, as a work item forwards it (and as anyone with access to
 * the namespace could send it): the same checks as the item's, plus what the item adds.
 */
export function parseLoopResolution(payload: unknown): Checked<LoopResolution> {
  const fields = ['item_id', 'condition', 'resource_key', 'resolution', 'attempts', 'by', 'identity', 'note', 'operator'];
  const object = objectOf('resolveWork', payload, fields);
  if (!object.ok) return object;
  const p = object.value as Partial<LoopResolution>;
  const resolve = parseResolve({
    resolution: p.resolution,
    by: p.by,
    note: p.note,
    ...(p.attempts !== null && p.attempts !== undefined ? { attempts: p.attempts } : {}),
    ...(p.operator !== undefined ? { operator: p.operator } : {}),
  });
  const problems = [resolve.ok ? null : resolve.error];
  if (typeof p.item_id !== 'string' || !p.item_id.startsWith('datum-work/'))
    problems.push(
      `item_id ${echo(p.item_id)} ${withFix('is not a work item id', 'resolve through the work item (datum work resolve)')}`,
    );
  if (!isWorkCondition(String(p.condition)))
    problems.push(
      `condition ${echo(p.condition)} ${withFix('does not open work items', 'resolve through the work item (datum work resolve)')}`,
    );
  if (p.resource_key !== null && typeof p.resource_key !== 'string')
    problems.push(`resource_key ${withFix('must be a resource key or null', 'resolve through the work item')}`);
  if (p.identity !== null && typeof p.identity !== 'string')
    problems.push(`identity ${withFix('must be text or null', 'leave it to the work item')}`);
  return done('resolveWork', problems, {
    item_id: p.item_id as string,
    condition: p.condition as LoopResolution['condition'],
    resource_key: p.resource_key ?? null,
    resolution: p.resolution as LoopResolution['resolution'],
    attempts: resolve.ok ? resolve.value.attempts : null,
    by: p.by as string,
    identity: p.identity ?? null,
    note: p.note ?? null,
    ...(resolve.ok && resolve.value.operator ? { operator: resolve.value.operator } : {}),
  });
}

/**
 * Why a resolveWork Update may not resolve on `node`'s loop: its item_id is not that node's item
 * for the condition and resource it names (a raw Update naming another node's or another
 * condition's item would be recorded as that item's resolution); null when it is.
 */
export function foreignItem(node: string, r: Pick<LoopResolution, 'item_id' | 'condition' | 'resource_key'>): string | null {
  const own = workItemId(node, r.condition, r.resource_key);
  if (r.item_id === own) return null;
  return withFix(
    `item_id ${echo(r.item_id)} is not the item of ${node}'s ${r.condition}${r.resource_key === null ? '' : ` on "${r.resource_key}"`}, which is ${own}`,
    'resolve through that work item (datum work resolve <item>), which sends its own id',
  );
}

/** An episode as an item gives it ({run_id, opened_at, reopened, facts}), or 'invalid'. */
function episodeOf(value: unknown): WorkEpisode | 'invalid' {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return 'invalid';
  const e = value as Record<string, unknown>;
  const text = (v: unknown) => typeof v === 'string' && v.length > 0 && v.length <= MAX_NAME;
  const ok =
    Object.keys(e).every((k) => ['run_id', 'opened_at', 'reopened', 'facts'].includes(k)) &&
    text(e.run_id) &&
    text(e.opened_at) &&
    Number.isSafeInteger(e.reopened) &&
    (e.reopened as number) >= 0 &&
    (e.facts === null || (typeof e.facts === 'string' && /^[0-9a-f]{16}$/.test(e.facts)));
  return ok
    ? {
        run_id: e.run_id as string,
        opened_at: e.opened_at as string,
        reopened: e.reopened as number,
        facts: e.facts as string | null,
      }
    : 'invalid';
}
