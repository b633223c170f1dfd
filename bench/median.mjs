// The median of single bench runs that separate invocations recorded: a 1000-node run takes most
// of an hour, so three of them may come from different sessions. It takes the same row from each
// results file, refuses runs of different code, and combines them as `--repeat` does (rows.mjs).
//
//   node bench/median.mjs --row dev/1000/watch/1 [--into bench/results/<day>.json] \
//     bench/results/a.json[@commit][#n] bench/results/b.json[@commit][#n] …
//
// `@commit` (a prefix) picks the row when a file holds several of the same key, and `#n` the
// n-th of those (from 1) when several ran the same commit. Without --into
// it prints the combined row's JSON and table; with it, the row replaces that key's row in the
// day's file, and its table and chart are written again.

import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fail } from './provenance.mjs';
import { combineRuns, markdown, replaceRows, rowKey, writeDay } from './rows.mjs';

const ROOT = path.resolve(import.meta.dirname, '..');
const USAGE =
  'usage: node bench/median.mjs --row dev/1000/watch/1 [--into bench/results/<day>.json] [--accept-diff <file> … --because <why>] <results.json[@commit][#n]> …';

const { values, positionals } = parseArgs({
  options: {
    row: { type: 'string' },
    into: { type: 'string' },
    'accept-diff': { type: 'string', multiple: true },
    because: { type: 'string' },
    help: { type: 'boolean' },
  },
  allowPositionals: true,
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
if (!values.row || !/^[a-z-]+\/\d+\/(watch|poll)\/\d+$/.test(values.row))
  fail(
    `--row ${values.row ?? '(missing)'} must name a row as server/nodes/mode/workers, such as --row dev/1000/watch/1\n${USAGE}`,
  );
if (positionals.length < 2) fail(`give at least two results files to take a median of\n${USAGE}`);
const accepted = values['accept-diff'] ?? [];
if (accepted.length > 0 && !values.because?.trim())
  fail(
    `--accept-diff ${accepted.join(' ')} needs --because: say why runs that differ in those files measured the same thing (it is recorded in the row)\n${USAGE}`,
  );

const runs = [];
for (const spec of positionals) {
  const [, file, commit, nth] = /^(.+?)(?:@([0-9a-f]+))?(?:#(\d+))?$/.exec(spec);
  const data = await readFile(file, 'utf8').then(JSON.parse, (err) =>
    fail(`${file} is not a bench results file (${err.message.split('\n')[0]}): give a bench/results/*.json`),
  );
  const keyed = (data.results ?? []).filter((r) => rowKey(r) === values.row && (!commit || r.commit?.startsWith(commit)));
  const named = `${file}${commit ? ` at commit ${commit}` : ''}${nth ? `, row ${nth} of them` : ''}`;
  const rows = nth ? keyed.slice(Number(nth) - 1, Number(nth)) : keyed;
  if (rows.length === 0) {
    const held = (data.results ?? []).map((r) => `${rowKey(r)} ${r.commit?.slice(0, 7) ?? 'no commit'}`);
    fail(`${named} has no row ${values.row}; it holds: ${held.join(', ') || 'no rows'}`);
  }
  if (rows.length > 1)
    fail(
      `${named} has ${rows.length} rows ${values.row} (${rows.map((r) => r.commit?.slice(0, 7)).join(', ')}): pick one as ${file}@<commit>, or ${file}#<n> for the n-th`,
    );
  const [row] = rows;
  if (row.error) fail(`${named}: the row failed (${row.error}); a failed run has no figures to take a median of`);
  if ((row.repetitions ?? 1) !== 1)
    fail(
      `${named}: the row is already the median of ${row.repetitions} runs; give single runs (their spread is lost in a median)`,
    );
  if (!row.commit) fail(`${named}: the row names no commit, so which code it measured cannot be told`);
  if (row.dirty) fail(`${named}: the row measured a tree with uncommitted changes, so which code it ran cannot be told`);
  const twin = runs.find((r) => JSON.stringify(r.row) === JSON.stringify(row));
  if (twin) fail(`${named} and ${twin.file} hold the same run (every figure is equal): a run counts once in a median`);
  runs.push({ file, row });
}

// Runs of different code are not repetitions of one row: only docs and results may differ, and
// the files --accept-diff names, for the reason --because gives, which the row then carries.
const git = (...args) => execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' }).trim();
const [first] = runs;
const acceptedDifferences = [];
for (const { file, row } of runs.slice(1)) {
  let changed;
  try {
    changed = git(
      'diff',
      '--name-only',
      first.row.commit,
      row.commit,
      '--',
      '.',
      ':(exclude)docs',
      ':(exclude)bench/results',
      ':(exclude)*.md',
    );
  } catch (err) {
    fail(
      `git cannot compare ${first.row.commit.slice(0, 7)} and ${row.commit.slice(0, 7)} (${err.message.split('\n')[0]}): run from a clone that has both commits`,
    );
  }
  const differing = changed ? changed.split('\n') : [];
  const unaccepted = differing.filter((f) => !accepted.includes(f));
  if (unaccepted.length > 0)
    fail(
      `${first.file} (${first.row.commit.slice(0, 7)}) and ${file} (${row.commit.slice(0, 7)}) measured different code: ${unaccepted.join(', ')} differ. Only runs of the same code make a median; where a file differs in nothing the row measures (a refactor of the bench's own code), name it with --accept-diff and say why with --because`,
    );
  if (differing.length > 0)
    acceptedDifferences.push({ between: [first.row.commit, row.commit], files: differing, because: values.because.trim() });
}

const combined = {
  // Each single run's own count and spread (1, none) are not figures to take the median of.
  ...combineRuns(
    runs.map(({ row: { repetitions: _one, spread: _none, ...figures } }) => figures),
    [],
  ),
  commits: runs.map((r) => r.row.commit),
  combined_from: runs.map((r) => path.relative(ROOT, path.resolve(r.file))),
  ...(acceptedDifferences.length > 0 ? { accepted_differences: acceptedDifferences } : {}),
};
if (!values.into) {
  console.log(JSON.stringify(combined, null, 2));
  console.log(markdown([combined], null));
  process.exit(0);
}
const day = await readFile(values.into, 'utf8').then(JSON.parse, (err) =>
  fail(`--into ${values.into} is not a bench results file (${err.message.split('\n')[0]}): give a bench/results/<day>.json`),
);
// As typed: an argument with a space (a --because) in quotes, so the line can be run again.
const shellWord = (arg) => (/^[\w./@#=:,+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`);
const command = `node bench/median.mjs ${process.argv.slice(2).map(shellWord).join(' ')}`;
await writeDay(values.into, {
  date: path.basename(values.into, '.json'),
  commands: [...new Set([...(day.commands ?? []), command])],
  machine: day.machine,
  results: replaceRows(day.results ?? [], [combined]),
  soak: day.soak ?? null,
});
console.log(markdown([combined], null));
console.error(`bench: the median of ${runs.length} runs replaces ${values.row} in ${values.into}`);
