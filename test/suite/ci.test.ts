// What CI runs (issue 35): one answer to "is this CI?" for the set-up and the tests, `.ci/run`
// saying so itself, and a CI run that fails on a skipped test the skip policy does not allow
// (test/skip-policy.ts), shown on a real vitest run of a few skipping tests with the suite's reporter.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isCI } from '../../scripts/ci.cjs';
import { projectRoot } from '../../src/worker/paths';
import { FS_ADVERSARY_CASES, FUZZ_RUNS } from '../fuzz/generators';
import { propertyRuns } from '../unit/generators';

const ROOT = projectRoot();

describe('isCI', () => {
  it('is true for CI set to 1, true or yes in any case, as the set-up has always read it, and false otherwise', () => {
    for (const value of ['1', 'true', 'TRUE', 'True', 'yes', 'YES'])
      expect(isCI({ CI: value }), JSON.stringify(value)).toBe(true);
    for (const value of [undefined, '', '0', 'false', 'no', ' true', 'true ', 'ci', '2'])
      expect(isCI({ CI: value }), JSON.stringify(value)).toBe(false);
  });

  it('gives the property tests their CI counts for CI=yes and CI=1, not only for CI=true', () => {
    const saved = { CI: process.env.CI, runs: process.env.DATUM_PROPERTY_RUNS };
    try {
      delete process.env.DATUM_PROPERTY_RUNS;
      for (const value of ['yes', '1', 'true']) {
        process.env.CI = value;
        expect([propertyRuns('core'), propertyRuns('sequences')], `CI=${value}`).toEqual([100_000, 10_000]);
      }
      delete process.env.CI;
      expect([propertyRuns('core'), propertyRuns('sequences')]).toEqual([10_000, 2_000]);
    } finally {
      for (const [name, value] of [['CI', saved.CI] as const, ['DATUM_PROPERTY_RUNS', saved.runs] as const])
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
    }
  });

  it('is the only reader of CI in the code, the set-up, the tests, bench and faults', () => {
    const reads = new RegExp(String.raw`\benv(\.CI\b|\[\s*['"]CI['"]\s*\])`);
    const readers: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
        const rel = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(rel);
        else if (/\.(ts|mts|cts|js|mjs|cjs)$/.test(entry.name) && reads.test(readFileSync(path.join(ROOT, rel), 'utf8')))
          readers.push(rel);
      }
    };
    for (const dir of ['src', 'test', 'scripts', 'bench', 'faults', 'bin']) walk(dir);
    // This file sets CI to check the readers.
    expect(readers.sort()).toEqual(['scripts/ci.cjs', 'test/suite/ci.test.ts']);
  });
});

describe('.ci/run', () => {
  it("sets CI=true itself, then runs exactly the README's test command", () => {
    const steps = readFileSync(path.join(ROOT, '.ci/run'), 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.startsWith('#'));
    const readme = /^(npm \S+)\s+# set-up, lint, typecheck and every test$/m.exec(
      readFileSync(path.join(ROOT, 'README.md'), 'utf8'),
    );
    expect(readme, "the README's quick start names the test command").not.toBeNull();
    expect(steps).toEqual(['set -euo pipefail', 'cd "$(dirname "${BASH_SOURCE[0]}")/.."', 'export CI=true', readme![1]]);
  });
});

describe('the counts CI runs', () => {
  it('are the counts docs/security.md states: 10^4 per parsed surface, 1,000 filesystem adversary roots', () => {
    const doc = readFileSync(path.join(ROOT, 'docs/security.md'), 'utf8').replace(/\s+/g, ' ');
    expect(doc).toContain(`feeds every input surface it parses 10^${Math.log10(FUZZ_RUNS)} generated cases per run`);
    expect(doc).toContain(`the filesystem adversary ${FS_ADVERSARY_CASES.toLocaleString('en')} generated node roots per run`);
  });

  it("are the counts docs/testing.md's table of case counts states", () => {
    const doc = readFileSync(path.join(ROOT, 'docs/testing.md'), 'utf8');
    const row = (suite: string) =>
      doc
        .split('\n')
        .find((line) => line.startsWith(`| ${suite}`))
        ?.split(' | ')
        .slice(1, 3);
    const spelled = (n: number) =>
      n >= 10_000 && Number.isInteger(Math.log10(n)) ? `10^${Math.log10(n)}` : n.toLocaleString('en');
    const saved = process.env.CI;
    try {
      process.env.CI = 'true';
      const ci = [propertyRuns('core'), propertyRuns('sequences')];
      delete process.env.CI;
      const elsewhere = [propertyRuns('core'), propertyRuns('sequences')];
      expect(row('`test/fuzz/`, every parsed input surface')).toEqual([spelled(FUZZ_RUNS), spelled(FUZZ_RUNS)]);
      expect(row('`test/fuzz/fs-adversary.test.ts`')).toEqual([spelled(FS_ADVERSARY_CASES), spelled(FS_ADVERSARY_CASES)]);
      expect(row('`test/unit/properties.test.ts`')).toEqual([spelled(ci[0]), spelled(elsewhere[0])]);
      expect(row('`test/unit/properties-sequences.test.ts`')).toEqual([spelled(ci[1]), spelled(elsewhere[1])]);
    } finally {
      if (saved === undefined) delete process.env.CI;
      else process.env.CI = saved;
    }
  });

  it('every fuzz property runs RUNS cases, none fewer', () => {
    const dir = path.join(ROOT, 'test/fuzz');
    const counts = readdirSync(dir)
      .filter((name) => name.endsWith('.test.ts'))
      .flatMap((name) =>
        [...readFileSync(path.join(dir, name), 'utf8').matchAll(/numRuns: ([^,}\s]+)/g)].map((m) => `${name}: ${m[1]}`),
      );
    expect(counts.length).toBeGreaterThan(5);
    expect(counts.filter((c) => !c.endsWith(': RUNS'))).toEqual([]);
  });
});

describe('a run with skipped tests, through the suite reporter', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  /** A vitest project of `files` (path → text) whose only reporter is the suite's. */
  const project = (files: Record<string, string>) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'datum-skip-policy-'));
    dirs.push(dir);
    const reporter = JSON.stringify(path.join(ROOT, 'test/summary-reporter.ts'));
    files['vitest.config.mjs'] =
      `export default { test: { globals: true, include: ['test/**/*.test.ts'], reporters: [${reporter}] } };\n`;
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
      writeFileSync(path.join(dir, rel), text);
    }
    return dir;
  };
  const vitest = (dir: string, ci: string | undefined, ...args: string[]) => {
    // The run's own environment, less what marks this process as a vitest worker.
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'CI' && !name.startsWith('VITEST')));
    if (ci !== undefined) env.CI = ci;
    const run = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--root', dir, ...args], {
      cwd: dir,
      env,
      encoding: 'utf8',
      timeout: 90_000,
    });
    return { status: run.status, out: `${run.stdout}${run.stderr}` };
  };

  // A skip test/skip-policy.ts allows: its file, its name and its note.
  const ALLOWED_NAME =
    "reads seed 001's agent.yaml (host:, reconciliation.mode) and says which spelling it read; datum agent defaults to /etc/datum/agent.yaml";
  const ALLOWED_NOTE = 'this machine has an /etc/datum/agent.yaml: an agent would start';
  const allowedSkip = `it(${JSON.stringify(ALLOWED_NAME)}, (ctx) => ctx.skip(true, ${JSON.stringify(ALLOWED_NOTE)}));`;
  const passing = `it('the one that passes', () => expect(1).toBe(1));\n`;
  // Besides it: the same test skipping for another reason, a skip that names a missing program,
  // a runIf without a note, and a pass.
  const mixed = project({
    'test/cli/offline.test.ts': `describe('datum validate', () => {
      ${allowedSkip}
      it(${JSON.stringify(ALLOWED_NAME)}, (ctx) => ctx.skip(true, 'something else'));
    });\n`,
    'test/deploy/tools.test.ts': `it('passes promtool check rules', (ctx) => ctx.skip(true, 'promtool is not installed'));
    it.runIf(false)('runs as root', () => {});
    ${passing}`,
  });
  const offline = `test/cli/offline.test.ts > datum validate > ${ALLOWED_NAME}`;
  const allowedOnly = () =>
    project({
      'test/cli/offline.test.ts': `describe('datum validate', () => { ${allowedSkip} });\n`,
      'test/deploy/tools.test.ts': passing,
    });

  it('in CI, fails on each skip not on the allow-list, naming it and its note, and counts it as failed', () => {
    const { status, out } = vitest(mixed, 'yes');
    expect(status, out).toBe(1);
    expect(out).toContain(`skipped (allowed in CI: on a machine with a real /etc/datum/agent.yaml`);
    expect(out).toContain(`${offline}: ${ALLOWED_NOTE}\n`);
    expect(out).toContain(`FAILED, a skip CI does not allow: ${offline}: something else\n`);
    expect(out).toContain(
      'FAILED, a skip CI does not allow: test/deploy/tools.test.ts > passes promtool check rules: promtool is not installed\n',
    );
    expect(out).toContain('FAILED, a skip CI does not allow: test/deploy/tools.test.ts > runs as root: no reason given\n');
    expect(out).toContain('3 skipped test(s) are not on the allow-list of test/skip-policy.ts — fix: ');
    expect(out.trimEnd().split('\n').at(-1)).toBe('1 passed, 3 failed, 1 skipped');
  });

  it('in CI, passes when every skip is on the allow-list, and says why each may stand', () => {
    const { status, out } = vitest(allowedOnly(), 'true');
    expect(status, out).toBe(0);
    expect(out).toMatch(
      new RegExp(
        `^skipped \\(allowed in CI: on a machine with a real /etc/datum/agent\\.yaml.*\\): ${offline.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `,
        'm',
      ),
    );
    expect(out).not.toContain('FAILED');
    expect(out.trimEnd().split('\n').at(-1)).toBe('1 passed, 0 failed, 1 skipped');
  });

  it('in CI, leaves the tests a name filter (-t) left out unjudged and uncounted', () => {
    const { status, out } = vitest(allowedOnly(), 'true', '-t', 'the one that passes');
    expect(status, out).toBe(0);
    expect(out).not.toContain('FAILED');
    expect(out.trimEnd().split('\n').at(-1)).toBe('1 passed, 0 failed, 0 skipped');
  });

  it('outside CI, passes and lists every skip with its reason', () => {
    const { status, out } = vitest(mixed, undefined);
    expect(status, out).toBe(0);
    expect(out).toContain(
      'skipped (allowed outside CI only): test/deploy/tools.test.ts > passes promtool check rules: promtool is not installed\n',
    );
    expect(out).toContain('skipped (allowed outside CI only): test/deploy/tools.test.ts > runs as root: no reason given\n');
    expect(out).not.toContain('FAILED');
    expect(out.trimEnd().split('\n').at(-1)).toBe('1 passed, 0 failed, 4 skipped');
  });
});
