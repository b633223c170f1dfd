import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import * as vocabulary from '../../src/contract/vocabulary';
import * as conditions from '../../src/domain/conditions';
import { GATES, GATE_CONDITIONS } from '../../src/domain/gates';
import { LADDER } from '../../src/domain/ladder';
import { FLEET_CONDITION_MEANINGS, FLEET_CONDITION_TYPES } from '../../src/contract/fleet';
import { FLEET_WORK_CONDITIONS } from '../../src/domain/work-rules';

/*
 * The docs a newcomer reads stay true to the code: the generated tables are what the code
 * generates now, the hand-written gate and ladder tables list the code's gates and rungs in the
 * code's order, and every relative link in README.md, docs/ and bench/README.md leads somewhere.
 */

const ROOT = path.resolve(__dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const PAGES = ['README.md', 'bench/README.md', ...readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) =>
  f.endsWith('.md'),
);

/** The page's lines outside fenced code blocks. */
function prose(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (line.startsWith('```')) fenced = !fenced;
    return !fenced && !line.startsWith('```');
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  for (const line of prose(read(file))) {
    const m = /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    if (n > 0) seen.set(`${base}-${n}`, 1);
  }
  return new Set(seen.keys());
}

/** The first column of the markdown table that follows `heading` in `text`. */
function firstColumns(text: string, header: string): string[][] {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.startsWith(header));
  expect(start, `a table with the header "${header}"`).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim().replace(/`/g, '')),
    );
  }
  return rows;
}

describe('the docs', () => {
  it('docs/reasons.md is what the code generates', async () => {
    // A dynamic import: the script is an ES module, and this file compiles to CommonJS.
    const { REASONS_DOC, REGENERATE, renderReasonDocs } = await import('../../scripts/reason-docs.mjs');
    const fleet = { FLEET_CONDITION_TYPES, FLEET_CONDITION_MEANINGS, FLEET_WORK_CONDITIONS };
    const fresh = renderReasonDocs({
      vocabulary,
      gates: GATES,
      gateConditions: GATE_CONDITIONS,
      ladder: LADDER,
      conditions,
      fleet,
    });
    expect(read(REASONS_DOC) === fresh, `${REASONS_DOC} is stale — fix: run \`${REGENERATE}\` and commit the result`).toBe(true);
  });

  it("docs/architecture.md's gate and ladder tables list the code's gates and rungs, in order", () => {
    const architecture = read('docs/architecture.md');
    const gates = firstColumns(architecture, '| reason | closes when |').map(([reason]) => reason);
    expect(gates, 'the gate table of docs/architecture.md §4 against GATES — fix: edit the table').toEqual(
      GATES.map((g) => g.reason),
    );
    const rungs = firstColumns(architecture, '| status | reason | holds when |').map(
      ([status, reason]) => `${status} / ${reason}`,
    );
    expect(rungs, 'the ladder table of docs/architecture.md §4 against LADDER — fix: edit the table').toEqual(
      LADDER.map((r) => `${r.status} / ${r.reason}`),
    );
  });

  it('every relative link in README.md, docs/ and bench/README.md resolves to a file, and each #anchor to a heading', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      for (const line of prose(read(page))) {
        for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
          if (/^[a-z]+:/i.test(target)) continue;
          const [file, anchor] = target.split('#');
          const resolved = file === '' ? page : path.join(path.dirname(page), file);
          if (!existsSync(path.join(ROOT, resolved))) broken.push(`${page}: ${target} (no file ${resolved})`);
          else if (anchor !== undefined && resolved.endsWith('.md') && !anchors(resolved).has(anchor))
            broken.push(`${page}: ${target} (no heading #${anchor} in ${resolved})`);
        }
      }
    }
    expect(broken, 'links that lead nowhere — fix: point them at the file and heading that now hold the text').toEqual([]);
  });

  it('the README stays a page a newcomer reads', () => {
    expect(
      read('README.md').split('\n').length,
      'README.md over 300 lines — fix: move the manual into docs/',
    ).toBeLessThanOrEqual(300);
  });
});
