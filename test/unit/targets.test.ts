import { describe, expect, it } from 'vitest';
import {
  InvalidDesiredState,
  decide,
  decisionRequest,
  emptyHistory,
  specDigest,
  desiredDigest,
  fileBytes,
  recordResolution,
  valueDigest,
  targetOf,
  targetOfAction,
  type BoundIntent,
  type History,
  type OperatorDecision,
  type ResourceSpec,
} from '../../src/domain';
import { NOW, actionsOf, authorityOf, n24, n24After, snapshot } from './fixtures';
import { agentConfig, problemsFromZod, validateDesiredState } from '../../src/schemas';

/*
 * Targets and operator decisions (docs/architecture.md §4 "Targets and operator decisions"): what
 * a resource writes, one claimant per target, and yields and conflicts carried into later
 * generations only while the spec they were about is unchanged.
 */

const SHA = 'c'.repeat(64);
const release = (version: string): ResourceSpec => ({
  type: 'release',
  version,
  artifact: `artifacts/app-${version}.tgz`,
  sha256: SHA,
});

describe('targetOf: what a resource writes', () => {
  const rows: { name: string; key: string; spec: ResourceSpec; target: string }[] = [
    {
      name: 'a file is its path',
      key: 'config',
      spec: { type: 'file', path: 'etc/app/config.json', content: 'x' },
      target: 'file:etc/app/config.json',
    },
    {
      name: 'a backslash path is the same file',
      key: 'c',
      spec: { type: 'file', path: 'etc\\app\\config.json', content: 'x' },
      target: 'file:etc/app/config.json',
    },
    { name: 'a flag is its name', key: 'maintenance', spec: { type: 'flag', value: true }, target: 'flag:maintenance' },
    { name: 'every release is the one current link', key: 'build', spec: release('7.4'), target: 'release:current' },
    { name: 'another release key is still current', key: 'build2', spec: release('9.9'), target: 'release:current' },
    {
      name: 'a directory is its path',
      key: 'data',
      spec: { type: 'directory', path: 'srv\\data', mode: '0750' },
      target: 'directory:srv/data',
    },
    {
      name: 'a service is its state record',
      key: 'app',
      spec: { type: 'service', release: 'build', config: 'config', command: ['node'] },
      target: 'service:app',
    },
  ];
  it.each(rows)('$name', ({ key, spec, target }) => {
    expect(targetOf(key, spec)).toBe(target);
  });

  it('an action names the target its write spec touches, not the key it comes under', () => {
    expect(targetOfAction('file.write', 'settings', { path: 'etc/app/config.json', content: '', sha256: SHA })).toBe(
      'file:etc/app/config.json',
    );
    expect(targetOfAction('release.install', 'build2', { version: '9.9' })).toBe('release:current');
    expect(targetOfAction('flag.write', 'm', { name: 'maintenance', value: true })).toBe('flag:maintenance');
    expect(targetOfAction('file.write', 'x', null)).toBeNull();
  });
});

describe('shared targets are invalid desired state', () => {
  const doc = (resources: Record<string, unknown>) => ({ node: 'N-24', generation: 3, resources });
  const rows: { name: string; resources: Record<string, unknown>; says: RegExp }[] = [
    {
      name: 'two files at one path',
      resources: {
        config: { type: 'file', path: 'etc/app/config.json', content: 'a' },
        settings: { type: 'file', path: 'etc/app/config.json', content: 'b' },
      },
      says: /resources\.settings: resources\.config and resources\.settings claim the same target file:etc\/app\/config\.json.*fix: give each resource its own target/,
    },
    {
      name: 'two spellings of one path',
      resources: {
        config: { type: 'file', path: 'etc/app/config.json', content: 'a' },
        settings: { type: 'file', path: 'etc\\app\\config.json', content: 'b' },
      },
      says: /resources\.config and resources\.settings claim the same target file:etc\/app\/config\.json/,
    },
    {
      name: 'a file and a directory at one path',
      resources: {
        config: { type: 'file', path: 'srv/data', content: 'a' },
        data: { type: 'directory', path: 'srv/data' },
      },
      says: /resources\.config and resources\.data claim the same target path \(file:srv\/data, directory:srv\/data\)/,
    },
    {
      name: 'a second release takes over current',
      resources: { build: release('7.4'), build2: release('9.9') },
      says: /resources\.build and resources\.build2 claim the same target release:current.*fix: keep one release resource per node/,
    },
  ];
  it.each(rows)('$name', ({ resources, says }) => {
    let caught: unknown;
    try {
      validateDesiredState(doc(resources), 'desired/nodes/N-24.yaml', 'N-24');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(InvalidDesiredState);
    expect((caught as Error).message).toMatch(says);
  });
});

describe('agent.yaml may name a target', () => {
  const base = { node: 'N-24', root: '/var/lib/datum/N-24' };
  const rows: { name: string; overrides: Record<string, unknown>; problem: RegExp | null }[] = [
    {
      name: 'a file target',
      overrides: { 'file:etc/app/config.json': { approved_by: 'a', reason: 'r', since: NOW } },
      problem: null,
    },
    {
      name: 'the release target',
      overrides: { 'release:current': { approved_by: 'a', reason: 'r', since: NOW } },
      problem: null,
    },
    {
      name: 'a directory target',
      overrides: { 'directory:srv/data': { approved_by: 'a', reason: 'r', since: NOW } },
      problem: null,
    },
    {
      name: 'a directory target that leaves the root',
      overrides: { 'directory:../etc': { approved_by: 'a', reason: 'r', since: NOW } },
      problem: /"directory:\.\.\/etc" is not a plain path under the node root/,
    },
    {
      name: 'an unknown kind',
      overrides: { 'disk:sda': { approved_by: 'a', reason: 'r', since: NOW } },
      problem: /"disk:sda" names no target kind.*fix: name a resource key, or a target as Datum names it/,
    },
    {
      name: 'another release link',
      overrides: { 'release:old': { approved_by: 'a', reason: 'r', since: NOW } },
      problem: /"release:old" is not a release target \(the only one is release:current\)/,
    },
    {
      name: 'a file target spelled another way',
      overrides: { 'file:etc\\app.json': { approved_by: 'a', reason: 'r', since: NOW } },
      problem: /is not spelled as Datum names it \(file:etc\/app\.json\)/,
    },
    {
      name: 'a path that leaves the root',
      overrides: { 'file:../etc/passwd': { approved_by: 'a', reason: 'r', since: NOW } },
      problem: /"file:\.\.\/etc\/passwd" is not a plain path under the node root/,
    },
  ];
  it.each(rows)('$name', ({ overrides, problem }) => {
    const parsed = agentConfig.safeParse({ ...base, overrides });
    if (problem === null) return expect(parsed.success).toBe(true);
    // As InvalidAgentConfig words it: the field (the entry) and the fix.
    const problems = problemsFromZod(parsed.error!);
    expect(problems.map((p) => `${p.field}: ${p.problem} — fix: ${p.fix}`).join('\n')).toMatch(problem);
    expect(problems[0]?.field).toBe(`overrides.${Object.keys(overrides)[0]}`);
  });
});

describe('operator decisions carried into a later generation', () => {
  const gen12 = n24(12);
  /** Generation 13 with config's content spelled as the string of bytes Datum would write for { workers: 8 }. */
  const respelled = (generation: number): BoundIntent => {
    const base = n24(generation, { extra: { maintenance: { type: 'flag', value: true } } });
    const resources = {
      ...base.resources,
      config: { type: 'file' as const, path: 'etc/app/config.json', content: fileBytes({ workers: 8 }) },
    };
    return { ...base, resources, digest: desiredDigest(resources, base.policy) };
  };
  const held = (intent: BoundIntent, kind: 'yield' | 'conflict', at = '2026-11-29T11:00:00.000Z'): OperatorDecision => {
    const r = decisionRequest(gen12, 'config', { kind, by: kind === 'yield' ? 'oncall' : 'datum', at, note: null }, [])!;
    const { node: _n, ...rest } = r;
    void intent;
    return { ...rest, kind, generation: 12 };
  };
  // The node holds a config someone else wrote (not D7), so a repair would be planned.
  const theirs = { ...n24After(), config: 'f'.repeat(64) };
  const run = (intent: BoundIntent, decisions: Record<string, OperatorDecision>, history: History = emptyHistory()) =>
    decide({ intent, authority: authorityOf(intent), observation: { ...snapshot(theirs), decisions }, history, now: NOW });

  const rows: {
    name: string;
    intent: () => BoundIntent;
    decisions: (i: BoundIntent) => Record<string, OperatorDecision>;
    status: string;
    actions: string[];
    carried: boolean;
  }[] = [
    {
      name: 'no decision: the drift is repaired',
      intent: () => n24(13, { extra: { maintenance: { type: 'flag', value: true } } }),
      decisions: () => ({}),
      status: 'DRIFTED',
      actions: ['config:file.write'],
      carried: false,
    },
    {
      name: 'a yield on an unchanged spec is carried: the file stays theirs (the app is restarted onto it)',
      intent: () => n24(13, { extra: { maintenance: { type: 'flag', value: true } } }),
      decisions: (i) => ({ config: held(i, 'yield') }),
      status: 'DRIFTED',
      actions: ['app:service.restart'],
      carried: true,
    },
    {
      name: 'an open conflict on an unchanged spec is carried: CONFLICT, nothing repaired',
      intent: () => n24(13, { extra: { maintenance: { type: 'flag', value: true } } }),
      decisions: (i) => ({ config: held(i, 'conflict') }),
      status: 'CONFLICT',
      actions: [],
      carried: true,
    },
    {
      name: 'a yield re-spelled (the same bytes as a string, not a mapping) is carried: the value is unchanged',
      intent: () => respelled(13),
      decisions: (i) => ({ config: held(i, 'yield') }),
      status: 'DRIFTED',
      actions: ['app:service.restart'],
      carried: true,
    },
    {
      name: 'an open conflict re-spelled is carried: CONFLICT, nothing repaired',
      intent: () => respelled(13),
      decisions: (i) => ({ config: held(i, 'conflict') }),
      status: 'CONFLICT',
      actions: [],
      carried: true,
    },
    {
      name: 'a yield from before values were kept is carried while its spec is unchanged',
      intent: () => n24(13, { extra: { maintenance: { type: 'flag', value: true } } }),
      decisions: (i) => ({ config: { ...held(i, 'yield'), value_digest: null } }),
      status: 'DRIFTED',
      actions: ['app:service.restart'],
      carried: true,
    },
    {
      name: 'a changed value of a yielded target waits for an operator: config is not written',
      intent: () => n24(13, { workers: 16 }),
      decisions: (i) => ({ config: held(i, 'yield') }),
      status: 'DRIFTED',
      actions: ['app:service.restart'],
      carried: true,
    },
    {
      name: 'a changed value is new intent: the conflict is not carried',
      intent: () => n24(13, { workers: 16 }),
      decisions: (i) => ({ config: held(i, 'conflict') }),
      status: 'DRIFTED',
      actions: ['config:file.write', 'app:service.restart'],
      carried: false,
    },
  ];
  it.each(rows)('$name', ({ intent, decisions, status, actions, carried }) => {
    const i = intent();
    const ds = decisions(i);
    const r = run(i, ds);
    expect(r.decision.convergence_status).toBe(status);
    expect(actionsOf(r)).toEqual(actions);
    const config = r.decision.resources.find((e) => e.resource_key === 'config')!;
    if (carried && ds.config?.kind === 'yield' && r.decision.desired_digest !== n24(13, { workers: 16 }).digest) {
      expect(config.ownership).toBe('OPERATOR_OWNED');
      expect(r.decision.operator_exceptions.map((e) => e.resource_key)).toContain('config');
    }
    // The ledger's durable copy holds the carried decision, and only that.
    expect((r.decision.operator_decisions ?? []).map((d) => `${d.resource_key}:${d.kind}`)).toEqual(
      carried ? [`config:${ds.config.kind}`] : [],
    );
  });

  it('a changed value starts a new episode for a conflict and the ledger entry says so', () => {
    const i = n24(13, { workers: 16 });
    const r = run(i, { config: held(i, 'conflict') });
    expect(r.decision.new_intent).toEqual([
      expect.objectContaining({ resource_key: 'config', kind: 'conflict', spec_digest: specDigest(gen12.resources.config) }),
    ]);
    expect(r.decision.new_intent?.[0]?.spec_digest_now).toBe(specDigest(i.resources.config));
    expect(r.decision.new_intent?.[0]?.value_digest_now).toBe(valueDigest('config', i.resources));
    expect(r.decision.reason_detail).toMatch(
      /New intent: the conflict on file:etc\/app\/config\.json .*another value.*a new episode/,
    );
  });

  it('a changed value of a yielded target is UNKNOWN until an operator decides, and the agent keeps the yield', () => {
    const i = n24(13, { workers: 16 });
    const yielded = held(i, 'yield');
    const r = run(i, { config: yielded });
    const config = r.decision.resources.find((e) => e.resource_key === 'config')!;
    expect(config.ownership).toBe('UNKNOWN');
    const condition = r.decision.conditions.find((c) => c.type === 'UNKNOWN_OWNERSHIP' && c.resource_key === 'config')!;
    expect(condition).toMatchObject({ needs_judgement: true, resolver: 'operator' });
    expect(condition.message).toMatch(/yielded to another writer by oncall .*for another value.*retake .*or yield/);
    expect(condition.evidence).toMatchObject({ claim: { resolutions: ['retake', 'yield'], value_digest: yielded.value_digest } });
    expect(r.decision.new_intent).toBeUndefined();
    // The ledger keeps the yield as it was given; the agent, which holds it, is told nothing new.
    expect(r.decision.operator_decisions).toEqual([
      expect.objectContaining({ kind: 'yield', value_digest: yielded.value_digest }),
    ]);
    expect(r.decisions_to_record).toEqual([]);

    // The operator decides. A yield hands the new value over too; a retake lets Datum write it.
    for (const resolution of ['yield', 'retake'] as const) {
      const resolved = recordResolution(r.history, { resource_key: 'config', resolution, by: 'alice' }, NOW);
      expect(resolved.error).toBeNull();
      const next = run(i, { config: yielded }, resolved.history);
      const entry = next.decision.resources.find((e) => e.resource_key === 'config')!;
      expect(entry.ownership).toBe(resolution === 'yield' ? 'OPERATOR_OWNED' : 'MANAGED');
      expect(actionsOf(next).includes('config:file.write')).toBe(resolution === 'retake');
      expect(next.decisions_to_record?.map((d) => [d.kind, d.value_digest])).toEqual([
        [resolution, valueDigest('config', i.resources)],
      ]);
    }
  });

  it('a yield from before values were kept is sent again so the agent holds its value too', () => {
    const i = n24(13, { extra: { maintenance: { type: 'flag', value: true } } });
    const legacy = { ...held(i, 'yield'), value_digest: null };
    const r = run(i, { config: legacy });
    expect(r.decisions_to_record?.map((d) => [d.kind, d.value_digest])).toEqual([['yield', valueDigest('config', i.resources)]]);
    // And a re-spelling of a legacy record is judged by its spec: it stands, waiting for an operator.
    const again = run(respelled(13), { config: legacy });
    expect(again.decision.resources.find((e) => e.resource_key === 'config')?.ownership).toBe('UNKNOWN');
  });

  it('a renamed resource at the same path with the same spec carries the yield to its new key', () => {
    const renamed = n24(13, { extra: {} });
    const spec = renamed.resources.config;
    const intent: BoundIntent = { ...renamed, resources: { ...renamed.resources, settings: spec } };
    delete intent.resources.config;
    (intent.resources.app as Extract<ResourceSpec, { type: 'service' }>).config = 'settings';
    const d = held(intent, 'yield');
    const obs = { ...snapshot(theirs), decisions: { settings: d } };
    obs.resources.settings = obs.resources.config!;
    delete obs.resources.config;
    const r = decide({ intent, authority: authorityOf(intent), observation: obs, history: emptyHistory(), now: NOW });
    expect(r.decision.resources.find((e) => e.resource_key === 'settings')?.ownership).toBe('OPERATOR_OWNED');
    expect(actionsOf(r)).toEqual(['app:service.restart']);
  });

  it('the agent is told what it lacks, and a retake the operator sent is not undone by an older record', () => {
    const i = n24(13, { extra: { maintenance: { type: 'flag', value: true } } });
    const conflict = held(i, 'conflict');
    // The loop knows of an open conflict the agent does not hold yet: it is sent.
    const history: History = { ...emptyHistory(), conflicts: { config: { since: NOW, sequence: [], resolution: null } } };
    const told = decide({ intent: i, authority: authorityOf(i), observation: snapshot(theirs), history, now: NOW });
    expect(told.decisions_to_record?.map((d) => `${d.resource_key}:${d.kind}:${d.target}`)).toEqual([
      'config:conflict:file:etc/app/config.json',
    ]);
    // After the operator's retake, the agent's older conflict is not carried again, and the retake is re-sent.
    const retaken: History = { ...emptyHistory(), retaken: { config: { by: 'alice', note: null, at: NOW } } };
    const r = run(i, { config: conflict }, retaken);
    expect(r.decision.convergence_status).not.toBe('CONFLICT');
    expect(actionsOf(r)).toEqual(['config:file.write']);
    expect(r.decisions_to_record?.map((d) => `${d.resource_key}:${d.kind}:${d.by}`)).toEqual(['config:retake:alice']);
  });

  it('a yield kept only by the ledger store (the agent lost .datum/) is carried, and the agent is told again', () => {
    const i = n24(13, { extra: { maintenance: { type: 'flag', value: true } } });
    const history: History = { ...emptyHistory(), stored_decisions: [held(i, 'yield')] };
    const r = run(i, {}, history);
    expect(r.decision.resources.find((e) => e.resource_key === 'config')?.ownership).toBe('OPERATOR_OWNED');
    expect(actionsOf(r)).not.toContain('config:file.write');
    expect(r.decisions_to_record?.map((d) => `${d.resource_key}:${d.kind}:${d.by}`)).toEqual(['config:yield:oncall']);
    expect(r.history.stored_decisions).toBeUndefined();
  });
});
