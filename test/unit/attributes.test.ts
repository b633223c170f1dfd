import { describe, expect, it } from 'vitest';
import {
  InvalidDesiredState,
  decide,
  desiredValue,
  emptyHistory,
  fileBytes,
  sha256Hex,
  targetNameProblem,
  targetOf,
  valueDigest,
  valueDigestOfAction,
  type ResourceSpec,
} from '../../src/domain';
import { kindOf } from '../../src/domain/resources';
import { validateDesiredState } from '../../src/schemas';
import { NOW, SHA_74, authorityOf, n24, snapshot } from './fixtures';

/*
 * mode, owner and group on files and directories, as desired state and the domain see them: one
 * stored spelling (equal intent, equal digest), the values observe must report, what a plan does
 * when only attributes differ, and the files that declare none left exactly as they were.
 */

const resources = (r: Record<string, unknown>) =>
  validateDesiredState({ node: 'N-24', generation: 1, resources: r }, 'd.yaml', 'N-24').resources;

function problems(r: Record<string, unknown>): string[] {
  try {
    resources(r);
  } catch (err) {
    if (err instanceof InvalidDesiredState) return err.problems.map((p) => `${p.field}: ${p.problem} — fix: ${p.fix}`);
    throw err;
  }
  return [];
}

describe('the one stored spelling', () => {
  const rows: { name: string; written: Record<string, unknown>; stored: Record<string, unknown> }[] = [
    { name: 'three octal digits are four', written: { mode: '750' }, stored: { mode: '0750' } },
    { name: 'four octal digits stay', written: { mode: '2775' }, stored: { mode: '2775' } },
    {
      name: 'a numeric owner written as a YAML number is its decimal string',
      written: { owner: 1000 },
      stored: { owner: '1000' },
    },
    { name: 'a numeric group with leading zeros is plain decimal', written: { group: '0004' }, stored: { group: '4' } },
    {
      name: 'names are kept as written',
      written: { owner: 'www-data', group: 'adm' },
      stored: { owner: 'www-data', group: 'adm' },
    },
  ];
  it.each(rows)('$name', ({ written, stored }) => {
    const spec = resources({ d: { type: 'directory', path: 'srv/d', ...written } }).d;
    expect(spec).toEqual({ type: 'directory', path: 'srv/d', ...stored });
  });

  it('equal intent spelled two ways has one desired digest', () => {
    const a = n24(12, { extra: { data: { type: 'directory', path: 'srv/data', mode: '750', owner: 1 } } });
    const b = n24(12, { extra: { data: { type: 'directory', path: 'srv/data', mode: '0750', owner: '1' } } });
    expect(a.digest).toBe(b.digest);
  });

  it('a file that declares no attribute keeps its plain sha256 value and its digest', () => {
    const config = n24().resources.config;
    expect(config).toEqual({ type: 'file', path: 'etc/app/config.json', content: { workers: 8 } });
    expect(desiredValue('config', n24().resources)).toBe(sha256Hex(fileBytes({ workers: 8 })));
  });
});

describe('invalid attributes', () => {
  const rows: { name: string; spec: Record<string, unknown>; says: RegExp }[] = [
    {
      name: 'a mode of non-octal digits',
      spec: { type: 'directory', path: 'd', mode: '0799' },
      says: /resources\.x\.mode: "0799" is not a mode/,
    },
    {
      name: 'a mode of five digits',
      spec: { type: 'directory', path: 'd', mode: '10755' },
      says: /resources\.x\.mode: "10755" is not a mode/,
    },
    {
      name: 'a mode as a YAML number',
      spec: { type: 'file', path: 'f', content: '', mode: 644 },
      says: /resources\.x\.mode: mode must be a quoted string of octal digits — fix: write it in quotes, such as mode: "0640"/,
    },
    {
      name: 'sticky on a file',
      spec: { type: 'file', path: 'f', content: '', mode: '1644' },
      says: /sets the sticky bit on a file: the sticky bit does nothing/,
    },
    {
      name: 'an owner that could be read as an option',
      spec: { type: 'directory', path: 'd', owner: '-rf' },
      says: /resources\.x\.owner: owner "-rf" is neither a user name/,
    },
    {
      name: 'a name starting with a digit',
      spec: { type: 'directory', path: 'd', group: '1adm' },
      says: /group "1adm" is neither a group name/,
    },
    {
      name: 'an id past any id',
      spec: { type: 'directory', path: 'd', owner: '4294967295' },
      says: /owner id 4294967295 is larger than any id/,
    },
    {
      name: 'a directory in Datum’s own area',
      spec: { type: 'directory', path: '.datum/x' },
      says: /resources\.x\.path: ".datum\/x" is inside ".datum", which Datum manages itself/,
    },
  ];
  it.each(rows)('$name', ({ spec, says }) => {
    expect(problems({ x: spec }).join('\n')).toMatch(says);
  });

  it('a file and a directory at one path, or a path inside a declared file, are invalid', () => {
    expect(
      problems({ f: { type: 'file', path: 'srv/data', content: '' }, d: { type: 'directory', path: 'srv/data' } }).join('\n'),
    ).toMatch(
      /resources\.f and resources\.d claim the same target path \(file:srv\/data, directory:srv\/data\), and one target has one owner/,
    );
    expect(problems({ f: { type: 'file', path: 'srv', content: '' }, d: { type: 'directory', path: 'srv/data' } })).toEqual([
      'resources.d.path: is inside "srv", which resources.f declares a file, so one of them can never be there — fix: move resources.d out of "srv", or give resources.f another path',
    ]);
    // A file inside a declared directory is what directories are for.
    expect(problems({ d: { type: 'directory', path: 'srv' }, f: { type: 'file', path: 'srv/data', content: '' } })).toEqual([]);
  });
});

describe('targets and values', () => {
  const data: ResourceSpec = { type: 'directory', path: 'srv\\data', mode: '0750', owner: 'daemon' };

  it('a directory is its path, spelled as a file path is', () => {
    expect(targetOf('data', data)).toBe('directory:srv/data');
    expect(targetNameProblem('directory:srv/data')).toBeNull();
    expect(targetNameProblem('directory:../etc')).toMatch(/is not a plain path under the node root/);
  });

  it('a directory is observed as exactly its declared attributes, and {} when it declares none', () => {
    expect(desiredValue('data', { data })).toEqual({ mode: '0750', owner: 'daemon' });
    expect(desiredValue('d', { d: { type: 'directory', path: 'x' } })).toEqual({});
  });

  it('a write and the spec it came from have one value digest, for file.write and file.attributes alike', () => {
    const secret: ResourceSpec = { type: 'file', path: 'k', content: 'k3y\n', mode: '0600', owner: 'daemon' };
    const sha256 = sha256Hex('k3y\n');
    const digest = valueDigest('secret', { secret });
    expect(valueDigestOfAction('file.write', { path: 'k', content: 'k3y\n', sha256, mode: '0600', owner: 'daemon' })).toBe(
      digest,
    );
    expect(valueDigestOfAction('file.attributes', { path: 'k', sha256, mode: '0600', owner: 'daemon' })).toBe(digest);
    // Another mode is another value: a yield of the one is not a yield of the other.
    expect(valueDigestOfAction('file.attributes', { path: 'k', sha256, mode: '0644', owner: 'daemon' })).not.toBe(digest);
    expect(valueDigestOfAction('directory.ensure', { path: 'srv/data', mode: '0750', owner: 'daemon' })).toBe(
      valueDigest('data', { data }),
    );
  });
});

describe('plans', () => {
  const secret = { type: 'file', path: 'etc/app/secret', content: 'k3y\n', mode: '0600' } as const;
  const sha = sha256Hex('k3y\n');
  const planned = (observed: unknown) =>
    kindOf(secret).plan({ resource_key: 'secret', observed: { value: observed } } as never, secret, n24());

  it('sets attributes in place when only they differ, and writes when the content does', () => {
    expect(planned({ sha256: sha, mode: '0644' })).toEqual({
      action: 'file.attributes',
      spec: { path: 'etc/app/secret', sha256: sha, mode: '0600' },
    });
    expect(planned({ sha256: 'f'.repeat(64), mode: '0644' })).toMatchObject({
      action: 'file.write',
      spec: { content: 'k3y\n', mode: '0600' },
    });
    expect(planned(null)).toMatchObject({ action: 'file.write' });
  });

  it('a file without attributes plans exactly the file.write it always did', () => {
    const config = n24().resources.config;
    const p = kindOf(config).plan({ resource_key: 'config', observed: { value: 'f'.repeat(64) } } as never, config, n24());
    const content = fileBytes({ workers: 8 });
    expect(p).toEqual({ action: 'file.write', spec: { path: 'etc/app/config.json', content, sha256: sha256Hex(content) } });
  });

  it('a directory is ensured before the files in it, and a service reads only its config file’s content digest', () => {
    const intent = n24(12, {
      extra: {
        data: { type: 'directory', path: 'etc/app', mode: '0750' },
        config: { type: 'file', path: 'etc/app/config.json', content: { workers: 8 }, mode: '0640' },
      },
    });
    const d7 = sha256Hex(fileBytes({ workers: 8 }));
    const obs = snapshot(
      {},
      {
        overrides: {},
        resources: {
          build: { type: 'release', value: { version: '7.4', sha256: SHA_74 }, marker: 'current->7.4' },
          data: { type: 'directory', value: null, marker: 'absent' },
          config: { type: 'file', value: null, marker: 'absent' },
          app: { type: 'service', value: { build: '7.4', config_sha256: d7 }, marker: 'pid:1' },
          maintenance: { type: 'flag', value: false, marker: 'flag:1' },
        },
      },
    );
    const r = decide({ intent, authority: authorityOf(intent), observation: obs, history: emptyHistory(), now: NOW });
    expect(r.decision.planned_actions.map((a) => `${a.resource_key}:${a.action}`)).toEqual([
      'data:directory.ensure',
      'config:file.write',
    ]);
    // The service runs the config's bytes; their digest is what it must report, whatever the file's mode.
    expect(r.decision.resources.find((x) => x.resource_key === 'app')?.desired).toEqual({ build: '7.4', config_sha256: d7 });
  });
});
