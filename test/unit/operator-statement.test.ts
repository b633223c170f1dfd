import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { InvalidInputError, parseResolve, parseSignal } from '../../src/domain';
import { parseAgentConfigText } from '../../src/schemas/documents';
import { otherDecision, parseStatement, statementText, type DecisionStatement } from '../../src/trust/statement';

/*
 * The statement an operator signs for a widening decision (src/trust/statement.ts): one canonical
 * text per decision, so the CLI that signs and the host that checks agree byte for byte, and a
 * statement for any other decision is told apart field by field. And agent.yaml's trust.operators
 * refuses a bad key line naming the field and the fix.
 */

const retake: DecisionStatement = {
  node: 'N-24',
  decision: 'retake',
  subject: 'config',
  targets: [],
  by: 'alice',
  expires: '2026-12-05T20:10:00.000Z',
};
const approve: DecisionStatement = {
  node: 'N-24',
  decision: 'approve',
  subject: 'datum-work/N-24/PLANNED_REMOVAL/decommission',
  targets: [
    { target: 'flag:maintenance', sha256: 'b'.repeat(64) },
    { target: 'file:etc/app/config.json', sha256: 'a'.repeat(64) },
  ],
  by: 'erin',
  expires: '2026-12-05T20:10:00.000Z',
};

describe('the statement of a decision', () => {
  it('is one canonical text: fields in order, targets sorted, a final newline; and reads back as the same decision', () => {
    expect(statementText(retake)).toBe(
      'datum-operator decision v1\nnode N-24\ndecision retake\nsubject config\nby alice\nexpires 2026-12-05T20:10:00.000Z\n',
    );
    const text = statementText(approve);
    expect(text.split('\n').filter((l) => l.startsWith('target '))).toEqual([
      `target ${'a'.repeat(64)} file:etc/app/config.json`,
      `target ${'b'.repeat(64)} flag:maintenance`,
    ]);
    // The order the plan lists targets in does not change the statement.
    expect(statementText({ ...approve, targets: [...approve.targets].reverse() })).toBe(text);
    expect(parseStatement(text)).toEqual({ ...approve, targets: [approve.targets[1], approve.targets[0]] });
    expect(parseStatement(statementText(retake))).toEqual(retake);
  });

  it('refuses a text that is not canonical, whatever it says', () => {
    const text = statementText(retake);
    const cases: Array<[string, RegExp]> = [
      [text.replace('datum-operator decision v1', 'datum-operator decision v2'), /does not begin with/],
      [text.trimEnd(), /names no expires/],
      [text.replace('node N-24\ndecision retake', 'decision retake\nnode N-24'), /not written as Datum writes/],
      [text.replace('subject config', 'subject  config'), /does not fit on one line|not written as Datum writes/],
      [text.replace('by alice\n', ''), /names no by/],
      [text.replace('by alice', 'by alice\nby mallory'), /is not one a statement has/],
      [text.replace('decision retake', 'decision grant'), /"grant" is not one an operator signs/],
      [`${text}node N-25\n`, /is not one a statement has/],
    ];
    for (const [bad, problem] of cases) expect((parseStatement(bad) as { problem: string }).problem).toMatch(problem);
  });

  it('cannot state a value that would break its line, so no field can smuggle another', () => {
    expect(() => statementText({ ...retake, by: 'alice\nnode N-25' })).toThrow(/does not fit on one line — fix:/);
    expect(() => statementText({ ...retake, subject: '' })).toThrow(/subject "" does not fit on one line/);
    expect(() => statementText({ ...approve, targets: [{ target: 'file:a\nb', sha256: 'c' }] })).toThrow(/cannot be stated/);
  });

  it('names the first field in which it is for another decision', () => {
    const { expires: _e, ...wanted } = retake;
    expect(otherDecision(retake, wanted)).toBeNull();
    expect(otherDecision(retake, { ...wanted, node: 'N-25' })).toBe(
      'it is signed for node "N-24", and this decision\'s is "N-25"',
    );
    expect(otherDecision(retake, { ...wanted, subject: 'app' })).toMatch(/signed for subject "config"/);
    expect(otherDecision(retake, { ...wanted, decision: 'approve' })).toMatch(/signed for decision "retake"/);
    expect(otherDecision(retake, { ...wanted, by: 'mallory' })).toMatch(/signed for by "alice"/);
    const { expires: _a, ...approval } = approve;
    expect(otherDecision(approve, { ...approval, targets: approve.targets.slice(1) })).toMatch(/names other targets/);
    expect(
      otherDecision(approve, { ...approval, targets: [{ ...approve.targets[0], sha256: 'c'.repeat(64) }, approve.targets[1]] }),
    ).toMatch(/other bytes/);
  });
});

describe("agent.yaml's trust.operators", () => {
  const agentYaml = (operators: unknown) =>
    stringify({ node: 'N-24', root: '/srv/n24', reconciliation: { mode: 'enforce' }, trust: { operators } });

  it('takes ssh-ed25519 key lines, and defaults to none', () => {
    const line = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIP0wvOnp0GyCtNdTSKMXIvIwX5u0IAIvVF619vbRAnwn alice@ops';
    expect(parseAgentConfigText(agentYaml([line]), 'agent.yaml').trust.operators).toEqual([line]);
    expect(parseAgentConfigText(stringify({ node: 'N-24', root: '/srv/n24' }), 'agent.yaml').trust.operators).toEqual([]);
  });

  it('refuses a bad key line naming the field and how to fix it', () => {
    const problem = (operators: unknown) => {
      try {
        parseAgentConfigText(agentYaml(operators), 'agent.yaml');
      } catch (error) {
        if (error instanceof InvalidInputError) return error.message;
        throw error;
      }
      return 'accepted';
    };
    expect(problem(['ssh-rsa AAAAB3NzaC1yc2E alice'])).toMatch(
      /trust\.operators\[0\]: .*is not an ssh-ed25519 public key — fix: write the key as its \.pub file holds it/s,
    );
    expect(problem('ssh-ed25519 AAAA')).toMatch(/trust\.operators.*is a list of public keys — fix: write one/s);
    expect(problem([42])).toMatch(/trust\.operators\[0\]: a trusted key is a line of text — fix:/s);
  });
});

describe('an operator signature in a payload', () => {
  const operator = { statement: 'datum-operator decision v1\n', signature: '-----BEGIN SSH SIGNATURE-----' };

  it('is carried unopened by a resolution and a resolveConflict; only its shape is judged there', () => {
    expect(parseResolve({ resolution: 'retake', by: 'alice', operator })).toMatchObject({ ok: true, value: { operator } });
    expect(parseResolve({ resolution: 'retake', by: 'alice' })).toMatchObject({ ok: true, value: { operator: null } });
    const signal = parseSignal('resolveConflict', { resource_key: 'config', resolution: 'retake', by: 'alice', operator });
    expect(signal).toMatchObject({ ok: true, value: { operator } });
  });

  it('of another shape is refused naming the field and how to sign', () => {
    const resolve = parseResolve({ resolution: 'retake', by: 'alice', operator: { statement: 1, signature: 'x' } });
    expect(resolve.ok || resolve.error).toMatch(/operator statement must be the signed text, .* — fix: sign with --sign-key/);
    const extra = parseResolve({ resolution: 'retake', by: 'alice', operator: { ...operator, key: 'mine' } });
    expect(extra.ok || extra.error).toMatch(/operator has unknown field\(s\) key — fix:/);
    const signal = parseSignal('resolveConflict', { resource_key: 'config', resolution: 'retake', by: 'a', operator: 'sig' });
    const problems = signal.ok ? '' : signal.problems.join('; ');
    expect(problems).toContain('operator: must be {"statement": "…", "signature": "…"} or null');
    expect(problems).toContain('sign with --sign-key');
  });
});
