import { describe, expect, it } from 'vitest';
import { emptyHistory, judgeRefresh, parseSignal, recordResolution } from '../../src/domain';
import { NOW, n24 } from './fixtures';

const g12 = n24(12);
const g13 = n24(13, { workers: 16 });
const at = (i: typeof g12) => ({ ok: true as const, generation: i.generation, digest: i.digest });

describe('refreshDesired verdicts', () => {
  it.each([
    {
      name: 'same generation, same digest: re-bind',
      signal: { generation: 12, digest: g12.digest },
      authority: at(g12),
      verdict: 'rebind',
      detail: /digest unchanged/,
    },
    {
      name: 'newer generation the authority holds: supersede',
      signal: { generation: 13, digest: g13.digest },
      authority: at(g13),
      verdict: 'supersede',
      detail: /Generation 13 supersedes 12/,
    },
    {
      name: 'older generation: refused',
      signal: { generation: 11, digest: g12.digest },
      authority: at(g12),
      verdict: 'refuse',
      detail: /already holds newer generation 12/,
    },
    {
      name: 'a generation the authority does not hold: refused',
      signal: { generation: 14, digest: g13.digest },
      authority: at(g13),
      verdict: 'refuse',
      detail: /authority is at generation 13/,
    },
    {
      name: 'a digest the authority does not hold: refused',
      signal: { generation: 13, digest: g12.digest },
      authority: at(g13),
      verdict: 'refuse',
      detail: /has digest .* at the authority/,
    },
    {
      name: 'an unreadable authority: refused',
      signal: { generation: 13, digest: g13.digest },
      authority: { ok: false as const, error: 'bad yaml' },
      verdict: 'refuse',
      detail: /cannot be read \(bad yaml\)/,
    },
  ])('$name', ({ signal, authority, verdict, detail }) => {
    const v = judgeRefresh(g12, signal, authority);
    expect(v.verdict).toBe(verdict);
    expect(v.detail).toMatch(detail);
  });
});

describe('signal payloads', () => {
  it.each([
    {
      name: 'refreshDesired without a digest',
      signal: 'refreshDesired' as const,
      payload: { generation: 12 },
      error: /digest: is missing — fix|digest: is missing \(fix/,
      fix: /fix: send the desired_digest the authority shows/,
    },
    {
      name: 'refreshDesired with a text generation',
      signal: 'refreshDesired' as const,
      payload: { generation: 'twelve', digest: g12.digest },
      error: /generation: must be a whole number/,
      fix: /fix: send \{"generation": <G>, "digest"/,
    },
    {
      name: 'resolveConflict with an unknown resolution',
      signal: 'resolveConflict' as const,
      payload: { resource_key: 'config', resolution: 'maybe', by: 'x' },
      error: /resolution: must be "retake" or "yield"/,
      fix: /fix: retake to let Datum own the resource again, yield to leave it/,
    },
    {
      name: 'resolveConflict without who',
      signal: 'resolveConflict' as const,
      payload: { resource_key: 'config', resolution: 'yield' },
      error: /by: is missing/,
      fix: /fix: say who resolves the conflict/,
    },
    {
      name: 'recheck with a payload',
      signal: 'recheck' as const,
      payload: { now: true },
      error: /recheck payload .* rejected: .*unknown field "now"/,
      fix: /fix: remove it or correct its spelling/,
    },
  ])('$name is rejected with the field and the fix', ({ signal, payload, error, fix }) => {
    const parsed = parseSignal(signal, payload);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect(parsed.error).toMatch(error);
      expect(parsed.error).toMatch(fix);
    }
  });

  it('accepts the documented payloads', () => {
    expect(parseSignal('refreshDesired', { generation: 12, digest: g12.digest }).ok).toBe(true);
    expect(
      parseSignal('resolveConflict', { resource_key: 'config', resolution: 'retake', by: 'oncall', note: 'cron removed' }).ok,
    ).toBe(true);
    expect(parseSignal('recheck', {}).ok).toBe(true);
    expect(parseSignal('recheck', undefined).ok).toBe(true);
  });

  it('a resolution for a resource without a conflict is an error naming the open ones', () => {
    const history = { ...emptyHistory(), conflicts: { build: { since: NOW, sequence: [], resolution: null } } };
    expect(recordResolution(history, { resource_key: 'config', resolution: 'retake', by: 'a' }, NOW).error).toBe(
      'no conflict is open on "config"; open conflicts: build',
    );
    const ok = recordResolution(history, { resource_key: 'build', resolution: 'yield', by: 'a', note: 'theirs' }, NOW);
    expect(ok.error).toBeNull();
    expect(ok.history.conflicts.build.resolution).toMatchObject({ resolution: 'yield', by: 'a' });
    expect(ok.history.yielded.build).toMatchObject({ by: 'a', note: 'theirs' });
  });

  it('a retake ends a refusal the agent gave while it held the conflict, so the repair is tried again', () => {
    const history = {
      ...emptyHistory(),
      conflicts: { config: { since: NOW, sequence: [], resolution: null } },
      refused: {
        config: {
          idempotency_key: 'k',
          marker: 'm',
          mode: 'enforce' as const,
          refusal: 'ConflictOpenRefusal: open conflict',
          at: NOW,
        },
      },
      attempt_count: 2,
    };
    const retaken = recordResolution(history, { resource_key: 'config', resolution: 'retake', by: 'alice' }, NOW);
    expect(retaken.error).toBeNull();
    expect(retaken.history.refused).toEqual({});
    expect(retaken.history.attempt_count).toBe(0);
    // A yield keeps it: Datum stays away either way.
    const yielded = recordResolution(history, { resource_key: 'config', resolution: 'yield', by: 'alice' }, NOW);
    expect(yielded.history.refused.config).toBeDefined();
  });
});
