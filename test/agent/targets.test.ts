import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { decisionRequest, fileBytes, specDigest, type ResourceSpec } from '../../src/domain';
import { action, cleanupNodes, expectRefusal, fileAction, makeNode, type TestNode } from './helpers';
import { n24 } from '../unit/fixtures';

/*
 * The agent's own judgement of targets (src/agent/node/claims.ts), with no workflow in front of it:
 * agent.yaml entries named after a target, entries bound to the target their key claimed, and
 * operator decisions kept per target, each refused at the moment of the write.
 */

afterEach(cleanupNodes);

const CONFIG = 'etc/app/config.json';
const OPS = { approved_by: 'oncall', reason: 'CHG-9', since: '2026-11-28T10:00:00Z' };
const fileSpec = (content: Record<string, number>): ResourceSpec => ({ type: 'file', path: CONFIG, content });
const onDisk = (t: TestNode) => fs.readFile(path.join(t.root, CONFIG), 'utf8').catch(() => null);

describe('agent.yaml protections by target', () => {
  it('an override named after a target protects it under any key', async () => {
    const t = await makeNode();
    await t.writeConfig({ overrides: { [`file:${CONFIG}`]: OPS } });
    const seen = await t.observe({ whatever: fileSpec({ workers: 8 }) });
    expect(seen.overrides.whatever).toEqual(OPS);
    expect(seen.protections.whatever).toEqual([
      { entry: `overrides.file:${CONFIG}`, kind: 'override', target: `file:${CONFIG}` },
    ]);
    const failure = await expectRefusal(t.apply(fileAction(t.node, 'whatever', CONFIG, { workers: 8 })), 'OperatorOwnedRefusal');
    expect(failure.message).toMatch(
      /"whatever" writes file:etc\/app\/config\.json, which is operator-owned \(overrides\.file:etc\/app\/config\.json/,
    );
    expect(await onDisk(t)).toBeNull();
  });

  it('an observe entry keyed by a resource follows its target to the key that claims it later', async () => {
    const t = await makeNode();
    await t.writeConfig({ resources: { config: 'observe' } });
    await t.observe({ config: fileSpec({ workers: 8 }) }); // binds the entry to file:etc/app/config.json
    const seen = await t.observe({ settings: fileSpec({ workers: 8 }) });
    expect(seen.resource_modes).toEqual({ settings: 'observe' });
    const failure = await expectRefusal(t.apply(fileAction(t.node, 'settings', CONFIG, { workers: 8 })), 'ObserveModeRefusal');
    expect(failure.message).toMatch(/reconciliation\.resources\.config, which protects file:etc\/app\/config\.json: observe/);
    const claims = JSON.parse(await fs.readFile(path.join(t.root, '.datum/claims.json'), 'utf8')) as {
      bindings: Record<string, { target: string }>;
    };
    expect(claims.bindings['reconciliation.resources.config']?.target).toBe(`file:${CONFIG}`);
  });
});

describe('records that cannot be read safely', () => {
  it('an observe still reports the node when .datum/ leads out of the root, protecting by agent.yaml alone', async () => {
    const t = await makeNode();
    await fs.symlink(t.outside, path.join(t.root, '.datum'));
    await t.writeConfig({ overrides: { [`file:${CONFIG}`]: OPS } });
    const seen = await t.observe({ config: fileSpec({ workers: 8 }) });
    expect(seen.overrides.config).toEqual(OPS);
    expect(seen.decisions).toEqual({});
    expect(await fs.readdir(t.outside)).toEqual(['precious.txt']);
    await fs.unlink(path.join(t.root, '.datum')); // so the cleanup can stop services
  });
});

describe('operator decisions kept per target', () => {
  const intent = n24(12);
  const request = (kind: 'yield' | 'conflict' | 'retake') =>
    decisionRequest(intent, 'config', { kind, by: 'oncall', at: new Date().toISOString(), note: null })!;

  it('a yield refuses the same value under any key, spelled any way; a new value waits for a retake', async () => {
    const t = await makeNode();
    await t.acts.recordDecision(request('yield'));
    const same = fileAction(t.node, 'settings', CONFIG, { workers: 8 }, { spec_digest: specDigest(intent.resources.config) });
    const failure = await expectRefusal(t.apply(same), 'OperatorOwnedRefusal');
    expect(failure.message).toMatch(/file:etc\/app\/config\.json was yielded to another writer by oncall .*for this same value/);
    // The same bytes from a spec spelled another way (a string, not a mapping) are the same value.
    const respelled: ResourceSpec = { type: 'file', path: CONFIG, content: fileBytes({ workers: 8 }) };
    await expectRefusal(
      t.apply(fileAction(t.node, 'settings', CONFIG, { workers: 8 }, { spec_digest: specDigest(respelled) })),
      'OperatorOwnedRefusal',
    );
    // Another value needs an operator's decision too: refused, and the yield stands.
    const other = fileAction(t.node, 'settings', CONFIG, { workers: 16 }, { spec_digest: specDigest(fileSpec({ workers: 16 })) });
    const newValue = await expectRefusal(t.apply(other), 'OperatorOwnedRefusal');
    expect(newValue.message).toMatch(
      /a new value needs an operator's decision before Datum writes it .*fix: an operator retakes it/,
    );
    expect(await onDisk(t)).toBeNull();
    expect((await t.observe({ settings: fileSpec({ workers: 16 }) })).decisions.settings?.kind).toBe('yield');
    // A retake ends it, whatever value it was about.
    await t.acts.recordDecision(request('retake'));
    expect((await t.apply(other)).outcome).toBe('applied');
  });

  it('a conflict is about the value: a re-spelled spec is refused, a new value ends it', async () => {
    const t = await makeNode();
    await t.acts.recordDecision(request('conflict'));
    const respelled: ResourceSpec = { type: 'file', path: CONFIG, content: fileBytes({ workers: 8 }) };
    await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG, { workers: 8 }, { spec_digest: specDigest(respelled) })),
      'ConflictOpenRefusal',
    );
    const other = fileAction(t.node, 'config', CONFIG, { workers: 16 }, { spec_digest: specDigest(fileSpec({ workers: 16 })) });
    expect((await t.apply(other)).outcome).toBe('applied');
    expect((await t.observe({ config: fileSpec({ workers: 16 }) })).decisions).toEqual({});
  });

  it('an open conflict is refused until a retake', async () => {
    const t = await makeNode();
    expect((await t.acts.recordDecision(request('conflict'))).holds?.kind).toBe('conflict');
    const action = fileAction(t.node, 'config', CONFIG, { workers: 8 }, { spec_digest: specDigest(intent.resources.config) });
    await expectRefusal(t.apply(action), 'ConflictOpenRefusal');
    expect((await t.observe({ config: fileSpec({ workers: 8 }) })).decisions.config?.kind).toBe('conflict');
    expect((await t.acts.recordDecision(request('retake'))).holds).toBeNull();
    expect((await t.apply(action)).outcome).toBe('applied');
  });

  it('is fenced per node like an apply: a decision of a generation below the fence is refused, and nothing is recorded', async () => {
    const t = await makeNode();
    // Generation 13 wrote the file with another spec: a yield of generation 12 about it would be
    // one a newer generation had ended.
    const other = fileSpec({ workers: 16 });
    await t.apply(
      fileAction(t.node, 'config', CONFIG, { workers: 16 }, { desired_generation: 13, spec_digest: specDigest(other) }),
    );
    const failure = await expectRefusal(t.acts.recordDecision(request('yield')), 'StaleGenerationRefusal');
    expect(failure.message).toMatch(
      /^recordDecision of "yield" for "config" on node N-24 refused: it is for generation 12, but this agent already accepted generation 13 for node N-24 \(first for "config"\)/,
    );
    expect(failure.details?.[0]).toMatchObject({ desired_generation: 12, accepted_generation: 13 });
    expect((await t.observe({ config: fileSpec({ workers: 8 }) })).decisions).toEqual({});
    // A retake of the old generation is refused the same way (nothing it could end is its own).
    await expectRefusal(t.acts.recordDecision(request('retake')), 'StaleGenerationRefusal');
  });

  it('a decision of a newer generation is kept and moves the fence, so the older one’s writes stop there too', async () => {
    const t = await makeNode();
    const newer = decisionRequest(n24(13), 'config', { kind: 'yield', by: 'oncall', at: new Date().toISOString(), note: null })!;
    expect((await t.acts.recordDecision(newer)).holds).toMatchObject({ kind: 'yield', generation: 13 });
    const failure = await expectRefusal(
      t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: true }, { desired_generation: 12 })),
      'StaleGenerationRefusal',
    );
    expect(failure.message).toContain('(when its workflow recorded a decision on "config")');
  });

  it('a malformed recordDecision changes nothing and says what is wrong', async () => {
    const t = await makeNode();
    const bad = { ...request('yield'), target: '../../etc/passwd', by: '' };
    const failure = await expectRefusal(t.acts.recordDecision(bad), 'InvalidAction');
    expect(failure.message).toMatch(/target: is not a target \(file:<path>.*by: .*fix: send what decisionRequest\(\) builds/);
    expect(await fs.readdir(t.root)).toEqual([]);
  });
});
