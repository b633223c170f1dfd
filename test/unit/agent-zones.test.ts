import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/*
 * The agent's filesystem zone (src/agent/index.ts): only src/agent/fs/ touches a node's root, and
 * node:fs is imported there and in the files the map names with a reason. eslint.config.mjs
 * enforces it; this checks that the rule bites and that the map and the rule name the same files.
 */

const ROOT = path.resolve(__dirname, '../..');
const MAP = readFileSync(path.join(ROOT, 'src/agent/index.ts'), 'utf8');

/** The files the map lists as importing node:fs outside fs/, each with its reason. */
function mappedExceptions(): string[] {
  const section = MAP.slice(MAP.indexOf('`node:fs` is imported only in fs/'));
  return [...section.matchAll(/^ \* {3}(\S+\.ts) {2,}\S/gm)].map((m) => `src/agent/${m[1]}`).sort();
}

async function lintAs(file: string, text: string): Promise<string[]> {
  const eslint = new ESLint({ cwd: ROOT });
  const [result] = await eslint.lintText(text, { filePath: path.join(ROOT, file) });
  return result.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

/** Every .ts file under src/agent, relative to the repository. */
function agentFiles(dir = path.join(ROOT, 'src/agent')): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? agentFiles(path.join(dir, e.name))
      : e.name.endsWith('.ts')
        ? [path.relative(ROOT, path.join(dir, e.name))]
        : [],
  );
}

describe("the agent's filesystem zone", () => {
  it('is named the same in the map and in the lint rule, and each file it names imports node:fs', async () => {
    const config = (await import(path.join(ROOT, 'eslint.config.mjs'))) as {
      default: Array<{ ignores?: string[]; files?: string[] }>;
    };
    const zone = config.default.find((c) => c.files?.includes('src/agent/**/*.ts') && c.ignores?.includes('src/agent/fs/**'));
    expect(zone, 'eslint.config.mjs has the agent zone').toBeDefined();
    const ruled = zone!.ignores!.filter((f) => f !== 'src/agent/fs/**').sort();
    expect(mappedExceptions()).toEqual(ruled);
    for (const file of ruled) expect(readFileSync(path.join(ROOT, file), 'utf8')).toMatch(/from 'node:fs(\/promises)?'/);
    // And nothing outside fs/ and the list imports it as a value.
    const importers = agentFiles()
      .filter((f) => !f.startsWith('src/agent/fs/') && !ruled.includes(f))
      .filter((f) => /^import (?!type )[^;]*from 'node:fs(\/promises)?';/m.test(readFileSync(path.join(ROOT, f), 'utf8')));
    expect(importers).toEqual([]);
  });

  it('refuses node:fs and the fs wing’s inner modules in a provider, and allows the entry module and types', async () => {
    // Existing files, linted with the probe's text in place of theirs: the typed lint's project knows only real files.
    const file = 'src/agent/providers/flag.ts';
    expect(await lintAs(file, "import { promises } from 'node:fs';\nexport const p = promises;\n")).toHaveLength(1);
    expect(await lintAs(file, "import { readFile } from 'fs/promises';\nexport const r = readFile;\n")).toHaveLength(1);
    expect(await lintAs(file, "import { HeldDir } from '../fs/held';\nexport const h = HeldDir;\n")).toHaveLength(1);
    expect(await lintAs(file, "import { HeldDir } from '../fs';\nexport const h = HeldDir;\n")).toEqual([]);
    expect(await lintAs(file, "import type { Stats } from 'node:fs';\nexport type S = Stats;\n")).toEqual([]);
    // Inside the wing itself, node:fs is what it is made of.
    expect(await lintAs('src/agent/fs/watch.ts', "import { promises } from 'node:fs';\nexport const p = promises;\n")).toEqual(
      [],
    );
  });
});
