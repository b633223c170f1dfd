// A bench row and the table it prints: shared by run.mjs, which measures rows, and median.mjs,
// which takes the median of single runs recorded by separate invocations.

import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { writeChart } from './chart.mjs';

export const round = (x, digits = 2) =>
  x === null || x === undefined || Number.isNaN(x) ? null : Math.round(x * 10 ** digits) / 10 ** digits;

/** Rows from before --server ran on dev with one worker. */
export const serverOf = (r) => r.server ?? 'dev';
export const workersOf = (r) => r.workers ?? 1;
/** What a row measured: server, size, mode and controller count ("dev/1000/watch/1"). */
export const rowKey = (r) => `${serverOf(r)}/${r.nodes}/${r.mode}/${workersOf(r)}`;

/** `fresh` rows over `earlier` ones: a row replaces the earlier one of its key, in table order. */
export function replaceRows(earlier, fresh) {
  const keys = new Set(fresh.map(rowKey));
  return [...earlier.filter((r) => !keys.has(rowKey(r))), ...fresh].sort(
    (a, b) =>
      a.nodes - b.nodes || a.mode.localeCompare(b.mode) || workersOf(a) - workersOf(b) || serverOf(a).localeCompare(serverOf(b)),
  );
}

/**
 * One row from its repeated runs: every top-level figure is the median over the runs, with its
 * spread (lowest, highest) beside it; the nested detail (profiles, memory breakdown, slowest node)
 * is the run whose rollout time is the median's. A run that failed is counted and named.
 */
export function combineRuns(measured, failures) {
  const runs = measured.map(withControlPlaneCpu);
  const byRollout = [...runs].sort((a, b) => (a.rollout_s ?? Infinity) - (b.rollout_s ?? Infinity));
  const middle = byRollout[Math.floor((byRollout.length - 1) / 2)];
  const combined = { ...middle, repetitions: runs.length, spread: {} };
  // A run whose CPU window ended before its passes has no figure per node-pass to give.
  const held = runs.filter(passWindowHolds);
  for (const [key, value] of Object.entries(middle)) {
    const perPass = PER_NODE_PASS_ALL.includes(key);
    const values = (perPass ? held : runs).map((r) => r[key]);
    if (perPass) combined[key] = null;
    if (values.length === 0 || !values.every((v) => typeof v === 'number')) continue;
    if (!perPass && typeof value !== 'number') continue;
    const sorted = [...values].sort((a, b) => a - b);
    const mid = sorted.length / 2;
    combined[key] = sorted.length % 2 ? sorted[Math.floor(mid)] : round((sorted[mid - 1] + sorted[mid]) / 2, 3);
    if (sorted.length > 1) combined.spread[key] = [sorted[0], sorted[sorted.length - 1]];
  }
  if (runs.length > 1) combined.per_node_pass_runs = held.length;
  if (failures.length > 0) combined.failed_runs = failures.map((f) => f.error);
  return combined;
}

/**
 * The rollout against the shaped ceiling in CPU-s, the control plane's processes only: the server,
 * PostgreSQL and the controllers, without the agent. With the agent pinned to a core of its own
 * (--pin-agent), that is what production runs on the controller's and the server's hosts, while
 * the agent's share is the node's own work, which the ceiling's no-op agent does not do (the floor
 * measures it). Rows from before the figure get it from their per-process CPU.
 */
export function controlPlaneCpuRatio(datumCpu, ceilingCpu) {
  if (!datumCpu?.server || !datumCpu.worker || !ceilingCpu?.server || !ceilingCpu.controller) return null;
  const sum = (cpu, controller) => cpu.server.cpu_s + (cpu.postgres?.cpu_s ?? 0) + cpu[controller].cpu_s;
  return round(sum(datumCpu, 'worker') / sum(ceilingCpu, 'controller'));
}

function withControlPlaneCpu(run) {
  if ('control_over_ceiling_cpu' in run) return run;
  return { ...run, control_over_ceiling_cpu: controlPlaneCpuRatio(run.profile?.rollout_cpu, run.ceiling_cpu) };
}

const PER_NODE_PASS = ['server_ms_per_node_pass', 'postgres_ms_per_node_pass'];
/** Every figure per node-pass a row records, the ones a table shows among them. */
const PER_NODE_PASS_ALL = [...PER_NODE_PASS, 'worker_ms_per_node_pass', 'agent_ms_per_node_pass'];

/**
 * Whether a row's verification CPU window held its passes (bench/README.md, step 5): more than 1%
 * of them ending after it leaves no figure per node-pass. A row from before the check is judged
 * by its window (its CPU over the window, at its cores) against its median pass.
 */
function passWindowHolds(r) {
  // A median of runs: its figures per node-pass come from the runs whose window held, if any did.
  if (typeof r.per_node_pass_runs === 'number') return r.per_node_pass_runs > 0;
  if (typeof r.passes_after_window === 'number') return r.passes_after_window <= r.nodes * 0.01;
  const cpu = r.profile?.verification_cpu?.server;
  if (!cpu?.cores || typeof r.verification_p50_s !== 'number') return true;
  return r.verification_p50_s <= cpu.cpu_s / cpu.cores;
}

export function markdown(rows, soaked) {
  const cols = [
    ['server', 'server'],
    ['nodes', 'nodes'],
    ['mode', 'mode'],
    ['workers', 'workers'],
    ['repetitions', 'runs'],
    ['rollout_s', 'rollout s'],
    ['floor_s', 'floor s'],
    ['ceiling_s', 'ceiling s'],
    ['datum_over_floor', 'Datum/floor'],
    ['datum_over_ceiling', 'Datum/ceiling'],
    ['rollout_cpu_s_per_node', 'rollout CPU-s/node'],
    ['ceiling_cpu_s_per_node', 'ceiling CPU-s/node'],
    ['datum_over_ceiling_cpu', 'Datum/ceiling (CPU)'],
    ['control_over_ceiling_cpu', 'Datum/ceiling (CPU, without the agent)'],
    ['convergence_p50_s', 'conv p50 s'],
    ['convergence_p99_s', 'conv p99 s'],
    ['verification_pass_s', 'verify s'],
    ['server_ms_per_node_pass', 'server ms/node-pass'],
    ['postgres_ms_per_node_pass', 'PostgreSQL ms/node-pass'],
    ['detection_p50_s', 'detect p50 s'],
    ['detection_p99_s', 'detect p99 s'],
    ['detection_during_pass_p99_s', 'detect p99 in a pass s'],
    ['detections_during_pass', 'changes in a pass'],
    ['detection_observed_p99_s', 'observed p99 s'],
    ['detection_service_p99_s', 'service detect p99 s'],
    ['detections', 'detected'],
    ['events_per_steady_pass_p50', 'events/steady pass'],
    ['events_per_repair_p50', 'events/repair'],
    ['events_to_first_convergence_p50', 'events to converge'],
    ['worker_rss_mb', 'worker MB'],
    ['worker_peak_mb', 'worker peak MB'],
    ['worker_settled_mb', 'worker settled MB'],
    ['agent_rss_mb', 'agent MB'],
    ['agent_peak_mb', 'agent peak MB'],
    ['server_cpu_rollout_cores', 'server cores (rollout)'],
    ['postgres_cpu_rollout_cores', 'PostgreSQL cores (rollout)'],
    ['load_avg_1m', 'machine load (1 min)'],
    ['commit', 'commit'],
  ];
  const lines = [`| ${cols.map((c) => c[1]).join(' | ')} |`, `| ${cols.map(() => '---').join(' | ')} |`];
  const cell = (r, k) => {
    if (k === 'server') return serverOf(r);
    if (k === 'workers') return workersOf(r);
    if (k === 'commit') return r.commit ? `${r.commit.slice(0, 7)}${r.dirty ? ' (dirty)' : ''}` : 'n/a';
    if (k === 'repetitions') return r.repetitions ?? 1;
    if (PER_NODE_PASS.includes(k) && !passWindowHolds(r)) return 'none (passes after the CPU window)';
    const spread = r.spread?.[k];
    if (spread && spread[0] !== spread[1]) return `${r[k]} (${spread[0]}–${spread[1]})`;
    return r[k] === null || r[k] === undefined ? (r.error ? 'failed' : 'n/a') : r[k];
  };
  for (const r of rows) lines.push(`| ${cols.map(([k]) => cell(r, k)).join(' | ')} |`);
  for (const r of rows.filter((x) => x.error))
    lines.push('', `${serverOf(r)}, ${r.nodes} nodes, ${r.mode}, ${workersOf(r)} worker(s) failed: ${r.error}`);
  const withProfile = rows.filter((r) => r.profile);
  if (withProfile.length > 0) {
    lines.push(
      '',
      "Where the rollout spent CPU (cores busy on average over the rollout), the heartbeats and mutable-state writes the server took, and the server's time in persistence (SQLite on dev, PostgreSQL on the cluster):",
      '',
    );
    lines.push(
      '| server | nodes | mode | workers | server cores | PostgreSQL cores | worker cores | agent cores | heartbeats | state writes | server persistence s | top persistence operations (s) |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    );
    for (const r of withProfile) {
      const m = r.profile.rollout_server_metrics;
      const c = r.profile.rollout_cpu;
      lines.push(
        `| ${serverOf(r)} | ${r.nodes} | ${r.mode} | ${workersOf(r)} | ${c.server.cores} | ${c.postgres?.cores ?? 'n/a'} | ${c.worker.cores} | ${c.agent.cores} | ${m.heartbeats ?? 'n/a'} | ${m.state_writes ?? 'n/a'} | ${m.persistence_s} | ${m.persistence_top
          .slice(0, 3)
          .map((o) => `${o.operation} ${o.seconds}`)
          .join(', ')} |`,
      );
    }
  }
  if (soaked) {
    lines.push(
      '',
      `Soak: ${soaked.simulated_hours} h simulated (resync ${soaked.resync}) in ${soaked.wall_s} s: ${soaked.runs} runs via continue-as-new, at most ${soaked.events_per_run_max} events per run, ${soaked.events_current_run} in the current one; bounded: ${soaked.bounded}.`,
    );
  }
  return lines.join('\n');
}

/**
 * A day's results file and the table and chart beside it (`<day>.json`, `.md`, `.svg`):
 * `date` is the day, the rest goes into the JSON as it is.
 */
export async function writeDay(jsonPath, { date, commands, machine, results, soak }) {
  const base = jsonPath.replace(/\.json$/, '');
  await mkdir(path.dirname(jsonPath), { recursive: true });
  await writeFile(jsonPath, `${JSON.stringify({ date: new Date().toISOString(), commands, machine, results, soak }, null, 2)}\n`);
  const table = markdown(results, soak);
  await writeFile(
    `${base}.md`,
    `# Datum benchmark, ${date}\n\n${machine.cpus} cores (${machine.cpu_model}), ${machine.mem_gb} GiB, Node ${machine.node}.\n\n${commands.map((c) => `    ${c}`).join('\n')}\n\n${table}\n`,
  );
  await writeChart(results, `${base}.svg`, { date, cpus: machine.cpus });
}
