import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ESLint, type Rule } from 'eslint';
import tseslint from 'typescript-eslint';
import { afterEach, describe, expect, it } from 'vitest';

/*
 * The `datum/no-cycle` lint rule (eslint.cycles.mjs, issue 21): `npm run lint` fails on an import
 * cycle among src/'s modules, type-only imports and `import()` included, and passes without one.
 * Run by ESLint itself on a scratch tree, with the rule as the project's config wires it.
 */

const ROOT = path.resolve(__dirname, '../..');
const RULE_FILE = path.join(ROOT, 'eslint.cycles.mjs');

interface CycleModule {
  noCycle: Rule.RuleModule;
  importGraph: (dirs: string[]) => Map<string, string[]>;
  cyclesOf: (graph: Map<string, string[]>) => { cycles: string[][] };
}
const cycleModule = () => import(RULE_FILE) as Promise<CycleModule>;

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** Lints a scratch src/ holding `files`; the messages, as "file: message". */
async function lint(files: Record<string, string>): Promise<string[]> {
  dir = mkdtempSync(path.join(os.tmpdir(), 'datum-no-cycle-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, 'src', name)), { recursive: true });
    writeFileSync(path.join(dir, 'src', name), text);
  }
  const { noCycle } = await cycleModule();
  const eslint = new ESLint({
    cwd: dir,
    overrideConfigFile: true,
    overrideConfig: [
      {
        files: ['**/*.ts'],
        languageOptions: { parser: tseslint.parser },
        plugins: { datum: { rules: { 'no-cycle': noCycle } } },
        rules: { 'datum/no-cycle': ['error', { dirs: ['src'] }] },
      },
    ],
  });
  const results = await eslint.lintFiles(['src/**/*.ts']);
  return results.flatMap((r) => r.messages.map((m) => `${path.relative(dir!, r.filePath)}: ${m.message}`)).sort();
}

describe('datum/no-cycle', () => {
  it('fails on a cycle of type-only imports, naming the way round at each end', async () => {
    const messages = await lint({
      'contract/ledger.ts': "import type { Status } from '../domain/status';\nexport type Entry = { status: Status };\n",
      'domain/status.ts':
        "import type { Entry } from '../contract/ledger';\nexport type Status = 'OK';\nexport type E = Entry;\n",
    });
    expect(messages).toEqual([
      'src/contract/ledger.ts: ../domain/status closes an import cycle: src/contract/ledger.ts → src/domain/status.ts → src/contract/ledger.ts. Move what these modules share into one that none of them imports (a cycle of types counts too).',
      'src/domain/status.ts: ../contract/ledger closes an import cycle: src/domain/status.ts → src/contract/ledger.ts → src/domain/status.ts. Move what these modules share into one that none of them imports (a cycle of types counts too).',
    ]);
  });

  it('fails on a cycle through a dynamic import() and a directory index', async () => {
    const messages = await lint({
      'tracing/index.ts':
        "export async function start() {\n  return (await import('./sdk.js')).create();\n}\nexport type Log = string;\n",
      'tracing/sdk.ts': "import type { Log } from './index';\nexport const create = (): Log => 'on';\n",
      'cli/main.ts': "import { start } from '../tracing';\nexport const go = start;\n",
    });
    expect(messages.map((m) => m.split(':')[0])).toEqual(['src/tracing/index.ts', 'src/tracing/sdk.ts']);
  });

  it('passes when the shared part is moved into a module neither imports', async () => {
    const messages = await lint({
      'tracing/types.ts': 'export type Log = string;\n',
      'tracing/index.ts':
        "export type { Log } from './types';\nexport async function start() {\n  return (await import('./sdk.js')).create();\n}\n",
      'tracing/sdk.ts': "import type { Log } from './types';\nexport const create = (): Log => 'on';\n",
    });
    expect(messages).toEqual([]);
  });

  it('src/ has no import cycle', async () => {
    const { importGraph, cyclesOf } = await cycleModule();
    const graph = importGraph([path.join(ROOT, 'src')]);
    // The graph was read (an empty one would have no cycle either).
    expect(graph.size).toBeGreaterThan(100);
    expect(cyclesOf(graph).cycles.map((c) => c.map((f) => path.relative(ROOT, f)))).toEqual([]);
  });
});
