import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { loadAgentConfig } from '../../src/agent/config';
import { FIX, MAX_SIGNAL_DEPTH } from '../../src/contract';
import { InvalidAgentConfig, InvalidDesiredState, parseSignal, type InvalidInputError } from '../../src/domain';
import { echo } from '../../src/domain/bounds';
import { parseAgentConfigText, parseDesiredStateText } from '../../src/schemas/documents';
import { aliasBomb, deep } from './generators';

/*
 * The input caps (docs/architecture.md §3 "Input caps"), one named row per attack: each ends as
 * the typed invalid outcome whose message names the file, the field, the cap and the fix.
 */

const PROVENANCE = { revision: 'rev', author: null, loaded_at: '2026-12-01T00:00:00.000Z' };
const HEAD = 'node: N-24\ngeneration: 1\nresources:\n  maintenance: { type: flag, value: false }\n';
const AGENT = 'node: N-24\nroot: /var/lib/datum/N-24\nreconciliation: { mode: enforce }\n';
const chain = (n: number) =>
  [`l0: &l0 [${'['.repeat(30)}${']'.repeat(30)}]`]
    .concat(Array.from({ length: n }, (_, i) => `l${i + 1}: &l${i + 1} [${'['.repeat(30)}*l${i}${']'.repeat(30)}]`))
    .join('\n');

interface Row {
  name: string;
  text: string;
  field: string;
  problem: RegExp;
  fix: RegExp;
}

const rows: Row[] = [
  {
    name: 'a billion-laughs alias bomb',
    text: `${HEAD}lol:\n${aliasBomb(9, 9)}\n`,
    field: 'lol',
    problem: /holds more than 100000 values once its aliases are expanded \(MAX_DOCUMENT_VALUES\)/,
    fix: /instead of repeating them through aliases/,
  },
  {
    name: 'text nested 5,000 levels deep',
    text: `${HEAD}x: ${'['.repeat(5000)}${']'.repeat(5000)}\n`,
    field: '(line 5)',
    problem: /nested deeper than 32 levels \(MAX_DOCUMENT_DEPTH\)/,
    fix: /at most 32 levels deep/,
  },
  {
    name: 'a chain of aliases, each shallow, nested deep once expanded',
    text: `${HEAD}${chain(200)}\n`,
    field: 'l',
    problem: /nested deeper than 32 levels once its aliases are expanded/,
    fix: /at most 32 levels deep/,
  },
  {
    name: 'an alias inside its own anchor',
    text: `${HEAD}x: &a [*a]\n`,
    field: 'x',
    problem: /nested deeper than 32 levels once its aliases are expanded/,
    fix: /at most 32 levels/,
  },
  {
    name: '.inf in a file content',
    text: HEAD.replace('value: false', 'value: {x: .inf}'),
    field: 'resources.maintenance.value.x',
    problem: /is the number Infinity, which is not a JSON value/,
    fix: /no \.inf/,
  },
  {
    name: 'a YAML 1.1 timestamp (a Date) in a value',
    text: `%YAML 1.1\n---\n${HEAD.replace('value: false', 'value: {at: 2001-01-01}')}`,
    field: 'resources.maintenance.value.at',
    problem: /is a Date, which is not a JSON value/,
    fix: /timestamps/,
  },
  {
    name: 'a YAML 1.1 merge key whose value is not a mapping',
    text: `%YAML 1.1\n---\n${HEAD.replace('value: false', 'value: {v: {<<: false}}')}`,
    field: '(file)',
    problem: /has a YAML 1\.1 merge key \(<<\) whose value is not a mapping/,
    fix: /merge only mappings/,
  },
  {
    name: 'a YAML 1.1 merge key beside a non-JSON value',
    text: `%YAML 1.1\n---\n${HEAD.replace('value: false', 'value: {v: {<<: false}}')}zz: .inf\n`,
    field: '(file)',
    problem: /has a YAML 1\.1 merge key \(<<\) whose value is not a mapping/,
    fix: /merge only mappings/,
  },
  {
    name: 'YAML 1.1 aliases past the alias cap',
    text: `${HEAD}a: &a 1\nl: [${Array.from({ length: 120 }, () => '*a').join(', ')}]\n`,
    field: '(file)',
    problem: /uses aliases beyond what Datum reads \(maxAliasCount 100, MAX_YAML_ALIASES\)/,
    fix: /write the values out/,
  },
  {
    name: 'an unresolved tag',
    text: HEAD.replace('value: false', 'value: !secret x'),
    field: '(line 4, column',
    problem: /Unresolved tag: !secret/,
    fix: /tags/,
  },
  {
    name: 'a key that is a sequence',
    text: `${HEAD}? [a, b]\n: c\n`,
    field: '(file)',
    problem: /has a key that is a mapping, a sequence or an alias/,
    fix: /every key as plain text/,
  },
  {
    name: 'two documents in one file',
    text: `${HEAD}---\nnode: other\n`,
    field: '(file)',
    problem: /holds more than one YAML document/,
    fix: /one document per file/,
  },
  {
    name: 'a duplicate key',
    text: `${HEAD}generation: 2\n`,
    field: '(line 5, column 1)',
    problem: /Map keys must be unique/,
    fix: /correct the YAML syntax/,
  },
  {
    name: 'a file over its byte cap',
    text: `${HEAD}# ${'x'.repeat(300_000)}\n`,
    field: '(file)',
    problem: /is \d+ bytes, more than the 262144 bytes Datum reads \(MAX_DESIRED_STATE_BYTES\)/,
    fix: /move large file contents into the release's artifact/,
  },
];

function rejection(fn: () => unknown): InvalidInputError {
  try {
    fn();
  } catch (e) {
    if (e instanceof InvalidDesiredState || e instanceof InvalidAgentConfig) return e;
    throw new Error(`untyped: ${String(e)}`);
  }
  throw new Error('expected the input to be rejected');
}

describe('input caps: desired state', () => {
  for (const row of rows) {
    it(`${row.name} is InvalidDesiredState naming ${row.field}, the cap and the fix`, () => {
      const e = rejection(() => parseDesiredStateText(row.text, 'desired/nodes/N-24.yaml', PROVENANCE, 'N-24'));
      expect(e.message).toMatch(/^desired\/nodes\/N-24\.yaml: invalid desired state; nothing from this file was applied:/);
      const p = e.problems.find((x) => x.field.startsWith(row.field));
      expect(p, JSON.stringify(e.problems)).toBeDefined();
      expect(p!.problem).toMatch(row.problem);
      expect(p!.fix).toMatch(row.fix);
    });
  }
});

describe('input caps: agent.yaml', () => {
  it('an alias bomb in agent.yaml is InvalidAgentConfig naming the field, the cap and the fix', () => {
    const e = rejection(() => parseAgentConfigText(`${AGENT}lol:\n${aliasBomb(9, 9)}\n`, '/etc/datum/agent.yaml'));
    expect(e.message).toMatch(
      /^\/etc\/datum\/agent\.yaml: invalid agent config; nothing from this file was applied:\n {2}- lol: holds more than 100000 values .* — fix: /,
    );
  });
  it('agent.yaml over MAX_AGENT_CONFIG_BYTES is InvalidAgentConfig naming the cap', () => {
    const e = rejection(() => parseAgentConfigText(`${AGENT}# ${'x'.repeat(70_000)}\n`, 'agent.yaml'));
    expect(e.message).toMatch(/\(file\): is \d+ bytes, more than the 65536 bytes Datum reads \(MAX_AGENT_CONFIG_BYTES\) — fix: /);
  });
});

describe('input caps: files on disk are measured before they are read', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-caps-'));
    await fs.mkdir(path.join(dir, 'desired', 'nodes'), { recursive: true });
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('a desired-state file over its byte cap is {ok: false, kind: invalid} naming the cap', async () => {
    await fs.writeFile(path.join(dir, 'desired/nodes/N-1.yaml'), `${HEAD.replace('N-24', 'N-1')}# ${'x'.repeat(300_000)}\n`);
    const read = await new DesiredStateAuthority(dir).read('N-1');
    expect(read).toMatchObject({ ok: false, kind: 'invalid' });
    expect(!read.ok && read.error).toMatch(
      /desired\/nodes\/N-1\.yaml: invalid desired state; .*MAX_DESIRED_STATE_BYTES\) — fix: /s,
    );
  });

  it('a desired-state path that is a FIFO is refused without being opened (a read would block the worker)', async () => {
    execFileSync('mkfifo', [path.join(dir, 'desired/nodes/N-2.yaml')]);
    const read = await new DesiredStateAuthority(dir).read('N-2');
    expect(read).toMatchObject({ ok: false, kind: 'invalid' });
    expect(!read.ok && read.error).toMatch(/it is not a regular file — fix: make it a plain YAML file/);
  });

  it('an alias bomb read through the authority is {ok: false, kind: invalid}, not a raw error', async () => {
    await fs.writeFile(path.join(dir, 'desired/nodes/N-3.yaml'), `${HEAD.replace('N-24', 'N-3')}lol:\n${aliasBomb(9, 9)}\n`);
    const read = await new DesiredStateAuthority(dir).read('N-3');
    expect(read).toMatchObject({ ok: false, kind: 'invalid' });
    expect(!read.ok && read.error).toMatch(/lol: holds more than 100000 values/);
  });

  it('agent.yaml over its byte cap, or a FIFO, is InvalidAgentConfig before it is read', async () => {
    const big = path.join(dir, 'big.yaml');
    await fs.writeFile(big, `${AGENT}# ${'x'.repeat(70_000)}\n`);
    await expect(loadAgentConfig(big)).rejects.toThrow(/MAX_AGENT_CONFIG_BYTES\) — fix: /);
    const fifo = path.join(dir, 'fifo.yaml');
    execFileSync('mkfifo', [fifo]);
    await expect(loadAgentConfig(fifo)).rejects.toThrow(
      /is a FIFO, not a regular file — fix: point the agent at the agent\.yaml file/,
    );
  });
});

describe('input caps: signal payloads', () => {
  const cases: Array<[string, unknown, RegExp]> = [
    [
      'nested 4,000 levels deep',
      deep(4000, 'object'),
      new RegExp(`a\\.a\\.a\\.a: is nested deeper than ${MAX_SIGNAL_DEPTH} levels \\(fix: `),
    ],
    [
      'a 100 KB string',
      { resource_key: 'config', resolution: 'retake', by: 'x'.repeat(100_000) },
      /by: makes the value larger than 16384 characters \(fix: /,
    ],
    [
      'undefined as an array element',
      { resource_key: 'config', resolution: 'retake', by: 'x', note: [undefined] },
      /note\[0\]: is undefined, which is not a JSON value \(fix: /,
    ],
    ['an 8,000-character key', { ['k'.repeat(8000)]: 1 }, /\["k{40}… \(8000 characters\)"\]|has unknown field/],
  ];
  for (const [what, payload, message] of cases) {
    it(`a resolveConflict payload with ${what} is SIGNAL_REJECTED naming the field and the fix, in a bounded message`, () => {
      const parsed = parseSignal('resolveConflict', payload);
      expect(parsed.ok).toBe(false);
      if (parsed.ok) return;
      expect(parsed.error).toMatch(message);
      expect(parsed.error).toMatch(/\(fix: /);
      expect(parsed.error.length).toBeLessThan(1500);
      expect(parsed.error).not.toContain(FIX.repeat(2));
    });
  }
});

describe('echo: any outside value in a message, safely', () => {
  it('a value nested 20,000 deep (where JSON.stringify overflows) is described, not serialised', () => {
    expect(() => JSON.stringify(deep(20_000, 'array'))).toThrow(RangeError);
    expect(echo(deep(20_000, 'array'))).toBe('(a value whose [0][0][0][0][0][0][0][0] is nested deeper than 8 levels)');
  });
  it('a small value is its JSON, clipped', () => {
    expect(echo({ node: 'N-1' })).toBe('{"node":"N-1"}');
    expect(echo('x'.repeat(500), 20)).toBe(`"${'x'.repeat(19)}… (502 characters)`);
    expect(echo(undefined)).toBe('nothing');
  });
});
