import { describe, expect, it } from 'vitest';
import { compareVersions, parseRelations, standingInTheWay, type RelatedPackage } from '../../src/agent/dpkg/relations';
import {
  InvalidDesiredState,
  planItems,
  targetOf,
  targetOfAction,
  valueDigest,
  valueDigestOfAction,
  type BoundIntent,
  type PackageSpec,
} from '../../src/domain';
import { agentConfig, problemsFromZod, validateDesiredState } from '../../src/schemas';
import { n24 } from './fixtures';

/*
 * The package type's pure parts: the target and the plan the controller makes, what agent.yaml
 * may name, Debian version order (dpkg's own, row by row as `dpkg --compare-versions` answered on
 * this project's Debian 12 host), and which installed packages an install would push out.
 */

const SHA = 'e'.repeat(64);
const hello = (over: Partial<PackageSpec> = {}): PackageSpec => ({
  type: 'package',
  name: 'nginx',
  version: '1.22.1-9',
  ...over,
});

describe('package: target and plan', () => {
  it('targets the package by name, whatever key declares it, and the action says the same', () => {
    expect(targetOf('web', hello())).toBe('package:nginx');
    expect(targetOf('other-key', hello())).toBe('package:nginx');
    expect(targetOfAction('package.install', 'web', { name: 'nginx', version: '1.22.1-9' })).toBe('package:nginx');
    expect(targetOfAction('package.remove', 'web', { name: 'nginx' })).toBe('package:nginx');
  });

  it('plans package.install with the .deb where the controller resolved it, or from apt without one', () => {
    const base = n24();
    const withDeb = hello({ artifact: 'artifacts/nginx.deb', sha256: SHA });
    const intent: BoundIntent = {
      ...base,
      resources: { web: withDeb, tools: hello({ name: 'curl', version: '7.88.1-10' }) },
      locations: { web: '/srv/fleet/artifacts/nginx.deb' },
    };
    const assessment = (key: string, spec: PackageSpec) => ({
      resource_key: key,
      type: 'package' as const,
      spec,
      ownership: 'MANAGED' as const,
      ownership_provenance: null,
      ownership_reason: 'declared in desired state',
      desired: { version: spec.version, status: 'installed' },
      observed: { type: 'package' as const, value: null, marker: 'absent', obstruction: null, detail: {} },
      drift: true,
      effective_mode: 'enforce' as const,
    });
    const items = planItems(intent, [assessment('web', withDeb), assessment('tools', intent.resources.tools as PackageSpec)], 1);
    expect(items.map((i) => [i.action.resource_key, i.action.action, i.action.spec])).toEqual([
      ['tools', 'package.install', { name: 'curl', version: '7.88.1-10' }],
      ['web', 'package.install', { name: 'nginx', version: '1.22.1-9', artifact: '/srv/fleet/artifacts/nginx.deb', sha256: SHA }],
    ]);
    // The value a yield or a conflict is about is the same from the spec and from the action.
    const action = items.find((i) => i.action.resource_key === 'web')!.action;
    expect(valueDigestOfAction(action.action, action.spec)).toBe(valueDigest('web', intent.resources));
  });

  it('validates in desired state with the fix, and two resources on one package are one target too many', () => {
    const problems = (resources: Record<string, unknown>) => {
      try {
        validateDesiredState({ node: 'N-24', generation: 1, resources }, 'N-24.yaml');
        return [];
      } catch (err) {
        if (!(err instanceof InvalidDesiredState)) throw err;
        return err.problems;
      }
    };
    expect(problems({ web: hello() })).toEqual([]);
    const twice = problems({ web: hello(), web2: hello({ version: '1.22.1-10' }) });
    expect(twice.map((p) => p.problem)).toEqual([
      'resources.web and resources.web2 claim the same target package:nginx, and one target has one owner',
    ]);
    const bad = problems({ web: hello({ name: '-rf', version: '0:1.0' }) });
    expect(bad.map((p) => [p.field, p.problem])).toEqual([
      ['resources.web.name', '"-rf" starts with "-", so it would read as an option'],
      [
        'resources.web.version',
        '"0:1.0" has the epoch "0:", which dpkg reports as no epoch at all: write the version as dpkg reports it',
      ],
    ]);
  });

  it('lets agent.yaml name a package target, and refuses one that names no package', () => {
    const config = (overrides: Record<string, unknown>) => ({
      node: 'N-24',
      root: '/var/lib/datum/N-24',
      overrides: Object.fromEntries(
        Object.keys(overrides).map((k) => [k, { approved_by: 'oncall', reason: 'pinned', since: '2026-11-28T10:00:00Z' }]),
      ),
    });
    expect(agentConfig.safeParse(config({ 'package:nginx': 1 })).success).toBe(true);
    const refused = agentConfig.safeParse(config({ 'package:../nginx': 1 }));
    expect(refused.success).toBe(false);
    expect(problemsFromZod(refused.error!)).toEqual([
      {
        field: 'overrides.package:../nginx',
        problem: '"package:../nginx" names no package: "../nginx" contains "/", and a package name is never a path',
        fix: expect.stringContaining('package:<name>') as string,
      },
    ]);
  });
});

describe('Debian versions, in dpkg order', () => {
  const rows: [string, '<' | '=' | '>', string][] = [
    ['1.0', '=', '1.0'],
    ['1.0', '<', '1.1'],
    ['1.0~rc1', '<', '1.0'],
    ['1.0~rc1', '<', '1.0~rc2'],
    ['1.0+b1', '>', '1.0'],
    ['1:1.0', '>', '2.0'],
    ['1.0-1', '<', '1.0-2'],
    ['1.0a', '>', '1.0'],
    ['1.0', '<', '1.0.1'],
    ['1.10', '>', '1.9'],
    ['1.0-1~bpo1', '<', '1.0-1'],
    ['2.0-1', '>', '1.1-1'],
    ['1.0~~', '<', '1.0~'],
    ['1.0-0', '=', '1.0'],
    ['0:1.0', '=', '1.0'],
    ['1.0.', '>', '1.0'],
    ['1.0-1', '>', '1.0'],
    ['1.002', '=', '1.2'],
    ['1.0a', '<', '1.0+'],
    ['7.4', '>', '7.4~'],
  ];
  it.each(rows)('%s %s %s', (a, op, b) => {
    const c = compareVersions(a, b);
    expect(c < 0 ? '<' : c > 0 ? '>' : '=').toBe(op);
    const back = compareVersions(b, a);
    expect(back < 0 ? '<' : back > 0 ? '>' : '=').toBe(op === '<' ? '>' : op === '>' ? '<' : '=');
  });
});

describe('what an install would push out', () => {
  const installed = (
    name: string,
    version: string,
    fields: Partial<Record<'conflicts' | 'breaks' | 'provides', string>> = {},
  ): RelatedPackage => ({
    name,
    version,
    conflicts: parseRelations(fields.conflicts ?? ''),
    breaks: parseRelations(fields.breaks ?? ''),
    provides: parseRelations(fields.provides ?? ''),
  });

  it('reads relation fields as dpkg writes them', () => {
    expect(parseRelations('a (>= 1.0), b:any, c (<< 2) | d, e (> 1)')).toEqual([
      { name: 'a', op: '>=', version: '1.0', text: 'a (>= 1.0)' },
      { name: 'b', op: null, version: null, text: 'b:any' },
      { name: 'c', op: '<<', version: '2', text: 'c (<< 2)' },
      { name: 'd', op: null, version: null, text: 'd' },
      { name: 'e', op: '>=', version: '1', text: 'e (> 1)' },
    ]);
  });

  const rows: { name: string; candidate: Parameters<typeof standingInTheWay>[0]; installed: RelatedPackage[]; out: string[] }[] =
    [
      {
        name: "an installed package's Conflicts on the candidate's version",
        candidate: { name: 'web', version: '1.1-1' },
        installed: [installed('legacy', '1.0', { conflicts: 'web (<< 2.0)' })],
        out: ['legacy'],
      },
      {
        name: "an installed package's Conflicts on another version is no obstruction",
        candidate: { name: 'web', version: '2.0-1' },
        installed: [installed('legacy', '1.0', { conflicts: 'web (<< 2.0)' })],
        out: [],
      },
      {
        name: "an installed package's Breaks",
        candidate: { name: 'web', version: '1.1-1' },
        installed: [installed('plugin', '3', { breaks: 'web (>= 1.1)' })],
        out: ['plugin'],
      },
      {
        name: "the candidate's own Conflicts, by name and by what an installed package provides",
        candidate: { name: 'web', version: '1', conflicts: parseRelations('httpd, old-web (<< 5)') },
        installed: [installed('apache2', '2.4', { provides: 'httpd' }), installed('old-web', '4'), installed('old-web2', '4')],
        out: ['apache2', 'old-web'],
      },
      {
        name: "the candidate's Replaces of an installed package",
        candidate: { name: 'web', version: '1', replaces: parseRelations('web-common (<< 1)') },
        installed: [installed('web-common', '0.9')],
        out: ['web-common'],
      },
      {
        name: "an installed package's Conflicts on a virtual package the candidate provides",
        candidate: { name: 'exim4', version: '4.96', provides: parseRelations('mail-transport-agent') },
        installed: [
          installed('postfix', '3.7', { conflicts: 'mail-transport-agent' }),
          installed('mutt', '2', { breaks: 'mta (<< 1)' }),
        ],
        out: ['postfix'],
      },
      {
        name: 'its own older version is never in its way',
        candidate: { name: 'web', version: '2', conflicts: parseRelations('web (<< 2)') },
        installed: [installed('web', '1', { conflicts: 'web' })],
        out: [],
      },
    ];
  it.each(rows)('$name', ({ candidate, installed: all, out }) => {
    expect(standingInTheWay(candidate, all).map((f) => f.package)).toEqual(out);
  });
});
