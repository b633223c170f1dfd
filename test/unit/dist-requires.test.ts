import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// bench/, faults/ and scripts/ load Datum from dist/ by path (`require(dist('agent/services/launch.js'))`),
// which neither the type checker nor the dead-code finder follows: a name removed from a module
// would only show when someone next runs the benchmark or the fault matrix. This reads each such
// line and checks that the module's source still exports every name it takes.

const ROOT = path.resolve(__dirname, '..', '..');
const LINE = /const \{([^}]+)\} = require\(dist\('([^']+)\.js'\)\)/g;

function requiresIn(dir: string): { file: string; module: string; names: string[] }[] {
  return readdirSync(path.join(ROOT, dir))
    .filter((f) => /\.(mjs|js)$/.test(f))
    .flatMap((f) => {
      const file = path.join(dir, f);
      return [...readFileSync(path.join(ROOT, file), 'utf8').matchAll(LINE)].map((m) => ({
        file,
        module: m[2],
        names: m[1].split(',').map((n) => n.split(':')[0].trim()),
      }));
    });
}

describe('what bench/, faults/ and scripts/ take from dist/', () => {
  const found = ['bench', 'faults', 'scripts'].flatMap(requiresIn);

  it('finds the requires it checks', () => {
    expect(found.length).toBeGreaterThan(5);
  });

  it.each(found.map((r) => [`${r.file}: ${r.module}`, r] as const))('%s exports every name taken', async (_, r) => {
    const mod = (await import(path.join(ROOT, 'src', `${r.module}.ts`))) as Record<string, unknown>;
    const missing = r.names.filter((n) => !(n in mod));
    expect(
      missing,
      `${r.file} takes ${missing.join(', ')} from src/${r.module}.ts, which no longer exports it — fix: require it from the module that defines it`,
    ).toEqual([]);
  });
});
