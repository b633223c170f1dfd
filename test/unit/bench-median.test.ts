import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/*
 * bench/median.mjs: the median of single 1000-node runs recorded by separate invocations. What a
 * reader of bench/results relies on: the figures are the medians with their spread, the row names
 * every commit it came from, and runs that are not repetitions of one row are refused by name.
 */

const ROOT = path.resolve(__dirname, '../..');
const HEAD = execFileSync('git', ['-C', ROOT, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
const dir = mkdtempSync(path.join(os.tmpdir(), 'datum-median-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Row = Record<string, unknown>;
const run = (rollout: number, detect: number, extra: Row = {}): Row => ({
  commit: HEAD,
  dirty: false,
  server: 'dev',
  workers: 1,
  nodes: 1000,
  mode: 'watch',
  rollout_s: rollout,
  detection_p99_s: detect,
  repetitions: 1,
  spread: {},
  ...extra,
});
let files = 0;
function results(...rows: Row[]): string {
  const file = path.join(dir, `r${++files}.json`);
  const machine = { cpus: 2, cpu_model: 'test', mem_gb: 24, node: 'v20' };
  writeFileSync(file, JSON.stringify({ commands: ['npm run bench -- --nodes 1000'], machine, results: rows }));
  return file;
}
function median(...args: string[]) {
  return medianIn(ROOT, ...args);
}
function medianIn(root: string, ...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(root, 'bench/median.mjs'), ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
const ROW = ['--row', 'dev/1000/watch/1'];

describe('bench/median.mjs', () => {
  it('takes the median of each figure with its spread, and names every commit and file', () => {
    const [a, b, c] = [results(run(431, 149)), results(run(520, 90)), results(run(470, 120))];
    const out = median(...ROW, a, b, c);
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    const row = JSON.parse(out.stdout.slice(0, out.stdout.indexOf('\n}') + 2)) as Row & { spread: Row; combined_from: string[] };
    expect(row).toMatchObject({ repetitions: 3, rollout_s: 470, detection_p99_s: 120, commits: [HEAD, HEAD, HEAD] });
    expect(row.spread).toMatchObject({ rollout_s: [431, 520], detection_p99_s: [90, 149] });
    expect(row.combined_from).toHaveLength(3);
  });

  it('picks the n-th of several runs of one commit in one file with #n', () => {
    const both = results(run(431, 149), run(520, 90));
    const out = median(...ROW, `${both}#1`, `${both}#2`, results(run(470, 120)));
    expect(out.stderr).toBe('');
    expect(out.stdout).toContain('"rollout_s": 470');
    expect(median(...ROW, `${both}#3`, results(run(1, 1))).stderr).toMatch(/row 3 of them has no row dev\/1000\/watch\/1/);
  });

  it("--into replaces that row in the day's file and writes its table again, other rows kept", () => {
    const other = run(40, 1, { nodes: 100 });
    const day = results(other, run(999, 9));
    const out = median(...ROW, '--into', day, results(run(431, 149)), results(run(520, 90)), results(run(470, 120)));
    expect(out.status).toBe(0);
    const written = JSON.parse(readFileSync(day, 'utf8')) as { results: Row[]; commands: string[] };
    expect(written.results.map((r: Row) => [r.nodes, r.rollout_s, r.repetitions])).toEqual([
      [100, 40, 1],
      [1000, 470, 3],
    ]);
    expect(written.commands.at(-1)).toMatch(/^node bench\/median\.mjs --row dev\/1000\/watch\/1 --into /);
    const table = readFileSync(day.replace(/\.json$/, '.md'), 'utf8');
    expect(table).toContain('| 470 (431–520) |');
  });

  it('refuses runs of different code, naming the files that differ; docs and results may differ', () => {
    // A repository of its own, so the commits exist whatever the clone's history.
    const repo = path.join(dir, 'repo');
    mkdirSync(path.join(repo, 'bench'), { recursive: true });
    for (const f of ['median.mjs', 'rows.mjs', 'provenance.mjs', 'chart.mjs'])
      copyFileSync(path.join(ROOT, 'bench', f), path.join(repo, 'bench', f));
    const git = (...args: string[]) =>
      execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { encoding: 'utf8' }).trim();
    const commitWith = (file: string, text: string) => {
      mkdirSync(path.dirname(path.join(repo, file)), { recursive: true });
      writeFileSync(path.join(repo, file), text);
      git('add', '-A');
      git('commit', '-qm', file);
      return git('rev-parse', 'HEAD');
    };
    git('init', '-q');
    const before = commitWith('src/loop.ts', 'export const a = 1;\n');
    const code = commitWith('src/loop.ts', 'export const a = 2;\n');
    const docs = commitWith('docs/performance.md', '# figures\n');
    const at = (commit: string, rollout: number) => results(run(rollout, 1, { commit }));
    const refused = medianIn(repo, ...ROW, at(before, 1), at(code, 2));
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/measured different code: src\/loop\.ts differ/);
    const taken = medianIn(repo, ...ROW, at(code, 1), at(docs, 2));
    expect(taken.stderr).toBe('');
    expect(taken.stdout).toContain(`"commits": [\n    "${code}",\n    "${docs}"\n  ]`);
    expect(taken.stdout).not.toContain('accepted_differences');

    // A file named with --accept-diff may differ, for the reason --because gives, which the row keeps.
    const because = 'a refactor of the loop that changes nothing measured';
    const accepted = medianIn(repo, ...ROW, '--accept-diff', 'src/loop.ts', '--because', because, at(before, 1), at(code, 2));
    expect(accepted.stderr).toBe('');
    const row = JSON.parse(accepted.stdout.slice(0, accepted.stdout.indexOf('\n}') + 2)) as Row;
    expect(row.accepted_differences).toEqual([{ between: [before, code], files: ['src/loop.ts'], because }]);
    // Any other file that differs is still refused, by name.
    const bench = commitWith('bench/run.mjs', '// the harness\n');
    const other = medianIn(repo, ...ROW, '--accept-diff', 'src/loop.ts', '--because', because, at(before, 1), at(bench, 2));
    expect(other.status).toBe(2);
    expect(other.stderr).toMatch(/measured different code: bench\/run\.mjs differ/);
    expect(other.stdout).toBe('');
  });

  it("a table says there is no figure per node-pass when the pass's CPU window ended before its passes", () => {
    const held = run(470, 1, { server: 'dev-plain', server_ms_per_node_pass: 45.4, passes_after_window: 3 });
    const missed = run(734, 1, { server: 'cluster', server_ms_per_node_pass: 6.1, passes_after_window: 500 });
    // A row from before the check: judged by its window (CPU over the window, at its cores) against its median pass.
    const old = run(500, 1, {
      server: 'cluster',
      workers: 2,
      server_ms_per_node_pass: 6.2,
      verification_p50_s: 109,
      profile: {
        verification_cpu: { server: { cpu_s: 33.3, cores: 0.49 } },
        rollout_cpu: { server: { cores: 0.4 }, worker: { cores: 0.2 }, agent: { cores: 0.3 } },
        rollout_server_metrics: { persistence_s: 1, persistence_top: [] },
      },
    });
    const day = results(held, missed, old);
    const out = median(...ROW, '--into', day, results(run(431, 1)), results(run(520, 1)));
    expect(out.status).toBe(0);
    const lines = readFileSync(day.replace(/\.json$/, '.md'), 'utf8').split('\n');
    const row = (server: string, workers: number) => {
      const line = lines.find((l) => l.startsWith(`| ${server} | 1000 | watch | ${workers} |`));
      expect(line, `${server} with ${workers} worker(s)`).toBeDefined();
      return line!;
    };
    expect(row('cluster', 1)).toContain('| none (passes after the CPU window) |');
    expect(row('cluster', 2)).toContain('| none (passes after the CPU window) |');
    // 3 of 1000 passes after the window is within the 1%: the figure stands.
    expect(row('dev-plain', 1)).toContain('| 45.4 |');
    expect(row('dev-plain', 1)).not.toContain('none (passes after the CPU window)');
  });

  it('a median takes its figures per node-pass only from runs whose CPU window held their passes, and says how many', () => {
    const perPass = (ms: number, after: number) => ({
      server_ms_per_node_pass: ms,
      postgres_ms_per_node_pass: ms - 2,
      passes_after_window: after,
    });
    // The cluster at 1000 nodes, 7 December 2026: the first run's window ended before half its passes.
    const [a, b, c] = [
      results(run(734, 1, perPass(6.1, 500))),
      results(run(480, 1, perPass(20.1, 0))),
      results(run(628, 1, perPass(18.1, 4))),
    ];
    const out = median(...ROW, a, b, c);
    expect(out.status).toBe(0);
    const row = JSON.parse(out.stdout.slice(0, out.stdout.indexOf('\n}') + 2)) as Row & { spread: Row };
    expect(row).toMatchObject({
      rollout_s: 628,
      server_ms_per_node_pass: 19.1,
      postgres_ms_per_node_pass: 17.1,
      per_node_pass_runs: 2,
    });
    expect(row.spread).toMatchObject({ server_ms_per_node_pass: [18.1, 20.1] });
    expect(out.stdout).toMatch(/\| 19\.1 \(18\.1–20\.1\) \|/);
    // No run held: no figure, and the table says why.
    const none = median(...ROW, results(run(734, 1, perPass(6.1, 500))), results(run(700, 1, perPass(5.2, 300))));
    expect(none.status).toBe(0);
    const nothing = JSON.parse(none.stdout.slice(0, none.stdout.indexOf('\n}') + 2)) as Row;
    expect(nothing).toMatchObject({ server_ms_per_node_pass: null, per_node_pass_runs: 0 });
    expect(none.stdout).toContain('| none (passes after the CPU window) |');
  });

  it("gives each run's rollout against the ceiling in CPU without the agent, from its per-process CPU when it predates the figure", () => {
    const cpu = (server: number, postgres: number, controller: number, agent: number, name: string) => ({
      server: { cpu_s: server },
      postgres: { cpu_s: postgres },
      [name]: { cpu_s: controller },
      agent: { cpu_s: agent },
    });
    // The cluster's three 1000-node runs of 7 December 2026: the agent's own work (observe, apply,
    // probe on real files) is 150 to 210 CPU-s against the no-op agent's 20.
    const row = (rollout: number, datum: number[], ceiling: number[]) =>
      run(rollout, 1, {
        datum_over_ceiling_cpu: 2,
        profile: {
          rollout_cpu: cpu(datum[0], datum[1], datum[2], datum[3], 'worker'),
          rollout_server_metrics: { heartbeats: 0, state_writes: 0, persistence_s: 0, persistence_top: [] },
        },
        ceiling_cpu: cpu(ceiling[0], ceiling[1], ceiling[2], ceiling[3], 'controller'),
      });
    const [a, b, c] = [
      results(row(734, [294.1, 162, 125.8, 186.4], [144.5, 100.8, 51.3, 17.5])),
      results(row(480, [236, 140, 62, 163.4], [190, 130, 50, 21.1])),
      results(row(628, [400, 150, 85, 209.6], [200, 100, 41, 20.9])),
    ];
    const out = median(...ROW, a, b, c);
    expect(out.stderr).toBe('');
    const combined = JSON.parse(out.stdout.slice(0, out.stdout.indexOf('\n}') + 2)) as Row & { spread: Row };
    // (294.1 + 162 + 125.8) / (144.5 + 100.8 + 51.3) = 1.96; 438 / 370 = 1.18; 635 / 341 = 1.86.
    expect(combined.control_over_ceiling_cpu).toBe(1.86);
    expect(combined.spread).toMatchObject({ control_over_ceiling_cpu: [1.18, 1.96] });
    expect(out.stdout).toContain('| Datum/ceiling (CPU, without the agent) |');
    expect(out.stdout).toMatch(/\| 1\.86 \(1\.18–1\.96\) \|/);
  });

  const refusals: { name: string; args: () => string[]; says: RegExp }[] = [
    { name: 'one file', args: () => [...ROW, results(run(1, 1))], says: /at least two results files/ },
    {
      name: 'a row not named as server/nodes/mode/workers',
      args: () => ['--row', 'dev/1000'],
      says: /--row dev\/1000 must name a row/,
    },
    {
      name: 'a file that is not JSON',
      args: () => [...ROW, path.join(dir, 'missing.json'), results(run(1, 1))],
      says: /missing\.json is not a bench results file/,
    },
    {
      name: 'a file without the row, naming the rows it holds',
      args: () => [...ROW, results(run(1, 1, { nodes: 100 })), results(run(1, 1))],
      says: /has no row dev\/1000\/watch\/1; it holds: dev\/100\/watch\/1/,
    },
    {
      name: 'two rows of the key without @commit',
      args: () => [...ROW, results(run(1, 1), run(2, 2)), results(run(3, 3))],
      says: /has 2 rows dev\/1000\/watch\/1 .*pick one as .*@<commit>/,
    },
    {
      name: 'a row that is already a median',
      args: () => [...ROW, results(run(1, 1, { repetitions: 3 })), results(run(2, 2))],
      says: /already the median of 3 runs; give single runs/,
    },
    {
      name: 'a failed row',
      args: () => [...ROW, results(run(1, 1, { error: 'server down' })), results(run(2, 2))],
      says: /the row failed \(server down\)/,
    },
    {
      name: 'a dirty tree',
      args: () => [...ROW, results(run(1, 1, { dirty: true })), results(run(2, 2))],
      says: /uncommitted changes/,
    },
    {
      name: 'the same run twice',
      args: () => {
        const f = results(run(1, 1));
        return [...ROW, f, results(run(1, 1))];
      },
      says: /hold the same run/,
    },
    {
      name: '--accept-diff without --because',
      args: () => [...ROW, '--accept-diff', 'bench/run.mjs', results(run(1, 1)), results(run(2, 2))],
      says: /--accept-diff bench\/run\.mjs needs --because: say why/,
    },
    {
      name: 'a commit git does not have',
      args: () => [...ROW, results(run(1, 1)), results(run(2, 2, { commit: 'f'.repeat(40) }))],
      says: /git cannot compare/,
    },
  ];
  for (const refusal of refusals)
    it(`refuses ${refusal.name}, saying what to give instead, and prints no row`, () => {
      const out = median(...refusal.args());
      expect(out.status).toBe(2);
      expect(out.stderr).toMatch(refusal.says);
      expect(out.stdout).toBe('');
    });
});
