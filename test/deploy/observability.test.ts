// deploy/grafana/datum-dashboard.json and deploy/prometheus/{alerts,prometheus}.yml against the
// metrics real Datum processes export: every expression parses (Prometheus's own lezer grammar,
// and promtool), and every metric and label it names is on the /metrics of a
// real `datum worker` and `datum agent` (run as the image runs them: prebuilt workflow bundle,
// metrics on) after a node converged and then had a drift repaired. Datum's own metrics carry
// core's snake_case labels and join with its `temporal_*` series, and docs/observability.md's Metrics table
// lists every one with its labels. A real Prometheus, of the version docker-compose.yml runs
// (test/helpers/tools.ts builds it once per machine), scrapes those processes with the deploy
// config and evaluates every rule and every dashboard query.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { LRParser } from '@lezer/lr' with { 'resolution-mode': 'import' };
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { stopServices } from '../../src/agent/services';
import { METRICS_ADDRESS_ENV } from '../../src/worker/metrics';
import { WORKFLOW_BUNDLE_ENV } from '../../src/worker/bundle';
import { SHUTDOWN_BUDGET_S } from '../../src/worker/shutdown';
import { projectRoot } from '../../src/worker/paths';
import {
  ACTIVITY_METRIC_LABELS,
  CONTROL_TASK_QUEUE,
  CONVERGENCE_LATENCY_METRIC,
  DETECTION_LATENCY_METRIC,
  FLEET_LAST_LOOK_METRIC,
  LOOP_CACHE_METRIC,
  WORKFLOW_METRIC_LABELS,
  WORKFLOW_TYPES,
  ledgerQuery,
  reconcileWorkflowId,
  stateQuery,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { fileBytes } from '../../src/domain';
import { Fleet } from '../helpers/fleet';
import { startDevEnv } from '../helpers/temporal';
import { until } from '../helpers/until';
import { startTogether } from '../helpers/processes';
import { INSTALL_TIMEOUT_MS, PROMETHEUS, toolOrReason, toolOrSkip } from '../helpers/tools';

const ROOT = projectRoot();
const ALERTS_FILE = path.join(ROOT, 'deploy', 'prometheus', 'alerts.yml');
const PROMETHEUS_FILE = path.join(ROOT, 'deploy', 'prometheus', 'prometheus.yml');
const DASHBOARD_FILE = path.join(ROOT, 'deploy', 'grafana', 'datum-dashboard.json');
const COMPOSE_FILE = path.join(ROOT, 'docker-compose.yml');
const METRICS_DOC = path.join(ROOT, 'docs/observability.md');

/** Series Prometheus makes itself for every target, and the labels it attaches to every sample. */
const SCRAPE_SERIES = new Set(['up', 'scrape_duration_seconds', 'scrape_samples_scraped']);
const TARGET_LABELS = new Set(['job', 'instance']);

// ---------------------------------------------------------------------------------------------
// The expressions, from the files as Prometheus and Grafana read them.

interface Expression {
  where: string;
  expr: string;
}

interface AlertRule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

function alertRules(): AlertRule[] {
  const doc = parseYaml(readFileSync(ALERTS_FILE, 'utf8')) as { groups: { name: string; rules: AlertRule[] }[] };
  return doc.groups.flatMap((g) => g.rules);
}

interface Panel {
  title: string;
  type: string;
  targets?: { expr: string; refId: string }[];
  panels?: Panel[];
}

interface Dashboard {
  title: string;
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query?: string }[] };
}

const dashboard = (): Dashboard => JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;

/** Grafana's variables as a query sees them: the built-in intervals, then the dashboard's constants. */
function substituteGrafanaVariables(expr: string, d: Dashboard): string {
  const constants = new Map(d.templating.list.filter((v) => v.type === 'constant').map((v) => [v.name, v.query ?? '']));
  return expr.replace(/\$\{?(\w+)\}?/g, (whole, name: string) => {
    if (['__rate_interval', '__interval', '__range'].includes(name)) return '1m';
    const value = constants.get(name);
    if (value === undefined) throw new Error(`${whole} in "${expr}" is no variable of the dashboard`);
    return value;
  });
}

function dashboardExpressions(): Expression[] {
  const d = dashboard();
  const panels = d.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');
  return panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({ where: `panel "${p.title}" ${t.refId}`, expr: substituteGrafanaVariables(t.expr, d) })),
  );
}

function allExpressions(): Expression[] {
  return [...alertRules().map((r) => ({ where: `alert ${r.alert ?? r.record}`, expr: r.expr })), ...dashboardExpressions()];
}

// ---------------------------------------------------------------------------------------------
// PromQL, through the grammar of the Prometheus web UI (@prometheus-io/lezer-promql). The package
// is an ES module with a CommonJS build but ESM-only types: loaded with import() once.

let parser: LRParser;
beforeAll(async () => {
  ({ parser } = await import('@prometheus-io/lezer-promql'));
});

interface Selector {
  metric: string;
  labels: string[];
}

interface ParsedExpression {
  errors: number[];
  selectors: Selector[];
  /** by/without/on/ignoring labels. */
  grouping: string[];
}

function parsePromQL(expr: string): ParsedExpression {
  const tree = parser.parse(expr);
  const out: ParsedExpression = { errors: [], selectors: [], grouping: [] };
  const text = (node: { from: number; to: number }) => expr.slice(node.from, node.to);
  tree.iterate({
    enter(ref) {
      if (ref.type.isError) out.errors.push(ref.from);
      if (ref.name === 'VectorSelector') {
        const node = ref.node;
        const identifier = node.getChild('Identifier');
        const matchers = node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? [];
        const labels = matchers.map((m) => m.getChild('LabelName')).flatMap((l) => (l ? [text(l)] : []));
        if (identifier) out.selectors.push({ metric: text(identifier), labels });
      }
      if (ref.name === 'LabelName' && ref.node.parent?.name === 'GroupingLabels') out.grouping.push(text(ref));
    },
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Real processes.

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

const sum = (samples: Sample[]) => samples.reduce((t, s) => t + s.value, 0);

/** The Metrics table of docs/observability.md: metric → the label names its labels column lists in backticks. */
function documentedMetrics(): Map<string, string[]> {
  const text = readFileSync(METRICS_DOC, 'utf8');
  const section = /^## Metrics\n([\s\S]*?)^## /m.exec(text)?.[1] ?? '';
  const rows = new Map<string, string[]>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    const metric = /^`(datum_[a-z_]+)`$/.exec(cells[1] ?? '')?.[1];
    if (metric)
      rows.set(
        metric,
        [...(cells[4] ?? '').matchAll(/`([a-z_]+)`/g)].map((m) => m[1]),
      );
  }
  expect(rows.size, 'a Metrics table in docs/observability.md (| metric | type | from | labels | … |)').toBeGreaterThan(0);
  return rows;
}

async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, async () => {
      const server = createServer();
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      return server;
    }),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

const NODE = 'O-1';
let env: TestWorkflowEnvironment;
let fleet: Fleet;
let scratch: string;
const children: ChildProcess[] = [];
const output = new Map<ChildProcess, string>();
const address = { worker: '', agent: '', prometheus: '' };
/** Metric name → every label name seen on it, from both processes. */
const exported = new Map<string, Set<string>>();
const exportedBy = { worker: [] as Sample[], agent: [] as Sample[] };
/** When the node's loop started, and when the drift was repaired: every latency sample lies within. */
const span = { startedMs: 0, repairedMs: 0 };
/** The alerts the real Prometheus holds now (pending or firing). */
async function alertsNow(): Promise<{ labels: { alertname: string }; state: string }[]> {
  const body = (await (await fetch(`http://${address.prometheus}/api/v1/alerts`)).json()) as {
    data: { alerts: { labels: { alertname: string }; state: string }[] };
  };
  return body.data.alerts;
}

/** Whether the real Prometheus runs (it is skipped where it cannot be built). */
let prometheusRuns = false;
/** Processes the test stops on purpose: their exit is no failure to report. */
const stopped = new Set<ChildProcess>();

function datum(args: string[], extraEnv: Record<string, string>): ChildProcess {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...extraEnv };
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'datum.js'), ...args], {
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  output.set(child, '');
  const keep = (chunk: Buffer) => output.set(child, output.get(child)! + chunk.toString());
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  children.push(child);
  return child;
}

async function stop(child: ChildProcess): Promise<number | null> {
  stopped.add(child);
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = once(child, 'exit') as Promise<[number | null]>;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
  const [code] = await exited;
  clearTimeout(timer);
  return code;
}

async function scrape(at: string): Promise<Sample[]> {
  const res = await fetch(`http://${at}/metrics`);
  expect(res.status).toBe(200);
  return parseExposition(await res.text());
}

/**
 * `until` for the processes under test: a probe that fails counts as not yet, a process that
 * exits fails the wait at once with its output, and a timeout shows every process's output.
 */
async function untilUp<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
  const found = await until(() => probe().catch(() => undefined), {
    what,
    timeoutMs,
    accept: (value) => value !== undefined,
    giveUp: () => {
      const exited = children.find((c) => c.exitCode !== null && !stopped.has(c));
      return exited && new Error(`a process exited (${exited.exitCode}) while waiting for ${what}:\n${output.get(exited)}`);
    },
    context: () => [...output.values()].join('\n---\n'),
  });
  return found as T;
}

beforeAll(async () => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'datum-observability-'));
  const bundle = path.join(scratch, 'workflow-bundle.js');
  // The bundle the image builds (Dockerfile: node scripts/bundle-workflows.mjs …).
  const built = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'bundle-workflows.mjs'), bundle], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (built.status !== 0) throw new Error(`bundle-workflows.mjs failed:\n${built.stdout}\n${built.stderr}`);

  [env, fleet] = await startTogether([startDevEnv(), Fleet.create('datum-observability-')]);
  // conflict_window 0s: the change below is ordinary drift, not another writer flipping a repair.
  await fleet.writeDesired(NODE, 1, { version: '7.4', policy: { conflict_window: '0s' } });
  await fleet.writeAgent(NODE, { mode: 'enforce' });
  const [w, a, p] = await freePorts(3);
  address.worker = `127.0.0.1:${w}`;
  address.agent = `127.0.0.1:${a}`;
  address.prometheus = `127.0.0.1:${p}`;
  datum(['worker', '--fleet', fleet.dir, '--data', fleet.dir, '--address', env.address], {
    [METRICS_ADDRESS_ENV]: address.worker,
    [WORKFLOW_BUNDLE_ENV]: bundle,
  });
  datum(['agent', '--config', fleet.agentFile(NODE), '--address', env.address], { [METRICS_ADDRESS_ENV]: address.agent });

  span.startedMs = Date.now();
  const handle = await env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
    taskQueue: CONTROL_TASK_QUEUE,
    workflowId: reconcileWorkflowId(NODE, 1),
    args: [{ node: NODE, generation: 1 }],
  });
  await untilUp('the node to converge', async () => {
    const s = await handle.query(stateQuery);
    return s.convergence_status === 'CONVERGED' ? s : undefined;
  });
  // Then a drift, repaired: someone edits the managed config file on the node.
  const changedMs = Date.now();
  await writeFile(path.join(fleet.root(NODE), 'etc/app/config.json'), fileBytes({ workers: 99 }));
  await untilUp('the drift to be repaired', async () => {
    const ledger = await handle.query(ledgerQuery);
    const repair = ledger.find(
      (e) => Date.parse(e.decided_at) > changedMs && e.execution_evidence.some((x) => x.resource_key === 'config'),
    );
    return repair?.convergence_status === 'CONVERGED' ? repair : undefined;
  });
  span.repairedMs = Date.now();
  // The worker's gauges read on a timer (the fleet's look every 10 s, its loop cache from its
  // start on) are exported once each has been read: scraped before that, the docs' table and
  // the alerts would be checked against a worker that has not said everything yet.
  const timed = [FLEET_LAST_LOOK_METRIC, LOOP_CACHE_METRIC];
  exportedBy.worker = await untilUp('the worker to export its timed gauges', async () => {
    const samples = await scrape(address.worker);
    return timed.every((m) => samples.some((x) => x.name === m)) ? samples : undefined;
  });
  exportedBy.agent = await scrape(address.agent);
  for (const s of [...exportedBy.worker, ...exportedBy.agent]) {
    const labels = exported.get(s.name) ?? new Set<string>();
    for (const l of Object.keys(s.labels)) labels.add(l);
    exported.set(s.name, labels);
  }
});

afterAll(async () => {
  await Promise.all(children.map((c) => stop(c)));
  if (fleet) await stopServices(fleet.root(NODE)).catch(() => undefined);
  await env?.teardown();
  await fleet?.remove();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------

describe('the alert rules and the dashboard', () => {
  it('cover what an operator watches: each topic of the issue has a panel or an alert', () => {
    const titles = dashboard()
      .panels.map((p) => p.title.toLowerCase())
      .join('\n');
    for (const topic of [
      'fleet last looked at',
      'fleet status over time',
      'open conditions by type',
      'detection latency',
      'convergence latency',
      'observation age against ttl',
      'agent actions by outcome',
    ])
      expect(titles, `a panel "${topic}"`).toContain(topic);
    const alerts = alertRules();
    const uses = (metric: RegExp) => alerts.filter((r) => metric.test(r.expr)).map((r) => r.alert);
    expect(uses(/status="BLOCKED"/), 'BLOCKED for longer than N minutes').not.toEqual([]);
    expect(uses(/status="CONFLICT"/), 'CONFLICT for longer than N minutes').not.toEqual([]);
    expect(uses(/datum_observation_age_seconds/), 'observation age above TTL').not.toEqual([]);
    expect(uses(/status="RETRY"/), 'a rising RETRY rate').not.toEqual([]);
    expect(uses(/datum_ledger_backlog/), 'a ledger backlog').not.toEqual([]);
    expect(uses(/datum_fleet_nodes_without_loop/), 'a node with desired state and no running loop').not.toEqual([]);
    expect(uses(/PollActivityTaskQueue/), 'an agent not polling').not.toEqual([]);
    expect(uses(/datum_fleet_last_look_timestamp_seconds/), 'a fleet nobody has looked at within its interval').not.toEqual([]);
    expect(uses(/PollWorkflowTaskQueue.*datum-control/), 'no controller polling datum-control').not.toEqual([]);
    for (const r of alerts) {
      expect(r.alert, 'every rule is an alert with a name').toMatch(/^Datum[A-Za-z]+$/);
      expect(r.for, `${r.alert} waits before firing`).toMatch(/^\d+[smh]$/);
      expect(r.labels?.severity, `${r.alert} has a severity`).toMatch(/^(warning|critical)$/);
      expect(r.annotations?.summary, `${r.alert} has a summary`).toBeTruthy();
    }
  });

  it('every expression parses as PromQL', () => {
    const expressions = allExpressions();
    expect(expressions.length).toBeGreaterThan(20);
    for (const { where, expr } of expressions) {
      const { errors } = parsePromQL(expr);
      expect(
        errors,
        `${where}: syntax error at ${errors.map((at) => JSON.stringify(expr.slice(at, at + 20))).join(', ')}`,
      ).toEqual([]);
    }
    // The check can fail: broken expressions have error nodes.
    for (const bad of ['rate(datum_actions_total[5m]', 'sum by (outcome (datum_actions_total)', 'datum_actions_total{outcome=}'])
      expect(parsePromQL(bad).errors, bad).not.toEqual([]);
  });

  it('is checked by the Prometheus release docker-compose.yml runs (the same major and minor)', () => {
    const image = /^\s+image: prom\/prometheus:v(\d+\.\d+)\.\d+$/m.exec(readFileSync(COMPOSE_FILE, 'utf8'));
    expect(image, 'docker-compose.yml runs prom/prometheus:vX.Y.Z').not.toBeNull();
    expect(PROMETHEUS.release, 'bump PROMETHEUS in test/helpers/tools.ts with the image').toMatch(
      new RegExp(`^${image![1].replace('.', '\\.')}\\.`),
    );
  });

  it(`passes promtool ${PROMETHEUS.release} check rules and check config`, { timeout: INSTALL_TIMEOUT_MS }, async (ctx) => {
    const promtool = await toolOrSkip(ctx, 'promtool');
    const rules = spawnSync(promtool, ['check', 'rules', ALERTS_FILE], { encoding: 'utf8' });
    expect(rules.status, `${rules.stdout}${rules.stderr}`).toBe(0);
    const config = spawnSync(promtool, ['check', 'config', PROMETHEUS_FILE], { encoding: 'utf8' });
    expect(config.status, `${config.stdout}${config.stderr}`).toBe(0);
    // Dashboard queries are no rules, but promtool parses them the same way inside a rule file.
    const asRules = path.join(scratch, 'dashboard-rules.yml');
    writeFileSync(
      asRules,
      stringifyYaml({
        groups: [
          { name: 'dashboard', rules: dashboardExpressions().map((e, i) => ({ record: `dashboard:q${i}`, expr: e.expr })) },
        ],
      }),
    );
    const dash = spawnSync(promtool, ['check', 'rules', asRules], { encoding: 'utf8' });
    expect(dash.status, `${dash.stdout}${dash.stderr}`).toBe(0);
  });

  it('names only metrics and labels that real Datum processes export', () => {
    expect(exported.size, 'the processes were scraped').toBeGreaterThan(10);
    for (const { where, expr } of allExpressions()) {
      const parsed = parsePromQL(expr);
      const metrics = parsed.selectors.map((s) => s.metric);
      for (const { metric, labels } of parsed.selectors) {
        if (SCRAPE_SERIES.has(metric)) continue;
        const known = exported.get(metric);
        expect(known, `${where}: ${metric} is exported by no Datum process`).toBeDefined();
        for (const label of labels.filter((l) => !TARGET_LABELS.has(l)))
          expect([...known!], `${where}: ${metric} has no label ${label}`).toContain(label);
      }
      const groupable = new Set([...TARGET_LABELS, ...metrics.flatMap((m) => [...(exported.get(m) ?? [])])]);
      for (const label of parsed.grouping) expect([...groupable], `${where}: grouping by ${label}`).toContain(label);
    }
    // Datum's own metrics, from the processes that should carry them.
    expect(exportedBy.worker.some((s) => s.name === 'datum_decisions_total')).toBe(true);
    // The fleet workflow's last look, read from its memo: a look taken while the test ran.
    const look = exportedBy.worker.find((s) => s.name === 'datum_fleet_last_look_timestamp_seconds');
    expect(look?.value, 'the worker exports when the fleet was last looked at').toBeGreaterThanOrEqual(
      span.startedMs / 1000 - 60,
    );
    expect(look!.value).toBeLessThanOrEqual(Date.now() / 1000);
    expect(exportedBy.worker.find((s) => s.name === 'datum_fleet_look_interval_seconds')?.value).toBe(60);
    expect(exportedBy.agent.some((s) => s.name === 'datum_actions_total')).toBe(true);
  });

  it("Datum's metrics carry core's snake_case labels, and join with its temporal_* series on them", () => {
    const datumSamples = [...exportedBy.worker, ...exportedBy.agent].filter((s) => s.name.startsWith('datum_'));
    expect(datumSamples.length).toBeGreaterThan(20);
    for (const s of datumSamples) {
      const camel = Object.keys(s.labels).filter((l) => /[a-z][A-Z]/.test(l));
      expect(camel, `${s.name} has camelCase labels`).toEqual([]);
    }
    // The workflow's series name the labels core's workflow series carry, with the same values ...
    const joins = (datum: Sample, keys: readonly string[], sdk: Sample[]) =>
      sdk.some((t) => t.name.startsWith('temporal_') && keys.every((k) => t.labels[k] === datum.labels[k]));
    const decision = exportedBy.worker.find((s) => s.name === 'datum_decisions_total')!;
    expect(decision.labels).toMatchObject({
      namespace: 'default',
      task_queue: CONTROL_TASK_QUEUE,
      workflow_type: 'reconcileNode',
    });
    expect(joins(decision, WORKFLOW_METRIC_LABELS, exportedBy.worker), 'a temporal_* series with the same labels').toBe(true);
    for (const s of exportedBy.worker.filter((x) => x.name.startsWith('datum_') && 'workflow_type' in x.labels))
      for (const l of WORKFLOW_METRIC_LABELS) expect(s.labels, `${s.name} has ${l}`).toHaveProperty(l);
    // ... and the agent's name the activity's, like temporal_activity_execution_latency.
    const action = exportedBy.agent.find((s) => s.name === 'datum_actions_total')!;
    expect(action.labels).toMatchObject({ namespace: 'default', task_queue: `datum-node-${NODE}`, activity_type: 'apply' });
    expect(joins(action, ACTIVITY_METRIC_LABELS, exportedBy.agent), 'a temporal_* series with the same labels').toBe(true);
    for (const s of exportedBy.agent.filter((x) =>
      ['datum_actions_total', 'datum_apply_duration_seconds_count'].includes(x.name),
    ))
      for (const l of ACTIVITY_METRIC_LABELS) expect(s.labels, `${s.name} has ${l}`).toHaveProperty(l);
  });

  it('a drift repaired shows one detection sample and one convergence sample of each start, within the test', () => {
    const within = (span.repairedMs - span.startedMs) / 1000;
    const histogram = (metric: string, labels: Record<string, string> = {}) => {
      const match = (suffix: string) =>
        exportedBy.worker.filter(
          (s) => s.name === `${metric}_${suffix}` && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
        );
      return {
        count: sum(match('count')),
        sum: sum(match('sum')),
        inf: sum(match('bucket').filter((s) => s.labels.le === '+Inf')),
      };
    };
    // The config file's change, from its mtime to the snapshot that showed it: under a second or so with the watch.
    const detection = histogram(DETECTION_LATENCY_METRIC);
    expect(detection).toMatchObject({ count: 1, inf: 1 });
    expect(detection.sum).toBeGreaterThan(0);
    expect(detection.sum).toBeLessThan(within);
    // The generation's first convergence (from the workflow's start), then the repair (from the drifted snapshot).
    const generation = histogram(CONVERGENCE_LATENCY_METRIC, { start: 'generation' });
    const drift = histogram(CONVERGENCE_LATENCY_METRIC, { start: 'drift' });
    expect(generation.count).toBe(1);
    expect(drift.count).toBe(1);
    for (const h of [generation, drift]) {
      expect(h.sum).toBeGreaterThan(0);
      expect(h.sum).toBeLessThan(within);
    }
  });

  it("docs/observability.md's Metrics table lists every metric Datum exports, with exactly its labels", () => {
    const table = documentedMetrics();
    const datum = new Map<string, Set<string>>();
    for (const [name, labels] of exported) {
      if (!name.startsWith('datum_')) continue;
      const base = name.replace(/_(bucket|sum|count)$/, '');
      const key = exported.has(`${base}_bucket`) ? base : name;
      const set = datum.get(key) ?? new Set<string>();
      for (const l of labels) if (l !== 'le') set.add(l);
      datum.set(key, set);
    }
    expect([...table.keys()].sort(), 'the metrics in the docs/observability.md table').toEqual([...datum.keys()].sort());
    for (const [name, labels] of datum)
      expect(table.get(name)?.sort(), `${name}'s labels in docs/observability.md`).toEqual([...labels].sort());
  });

  it('the compose healthchecks pass against a real worker and agent, and fail when nothing listens', () => {
    const compose = parseYaml(readFileSync(COMPOSE_FILE, 'utf8')) as {
      services: Record<string, { command?: string[]; healthcheck?: { test: string[] } }>;
    };
    const healthOf = (subcommand: string) => {
      const entry = Object.values(compose.services).find((s) => s.command?.[0] === subcommand);
      const test = entry?.healthcheck?.test ?? [];
      expect(test.slice(0, 3), `the ${subcommand} healthcheck runs node -e`).toEqual(['CMD', 'node', '-e']);
      return test[3];
    };
    const run = (script: string) => spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 }).status;
    const worker = healthOf('worker');
    const agent = healthOf('agent');
    expect(run(worker.replace('127.0.0.1:9464', address.worker))).toBe(0);
    expect(run(agent.replace('127.0.0.1:9465', address.agent))).toBe(0);
    // The worker's check looks for the control queue's poller: the agent's endpoint fails it.
    expect(run(worker.replace('127.0.0.1:9464', address.agent))).toBe(1);
    expect(run(worker.replace('127.0.0.1:9464', address.prometheus))).toBe(1);
  });
});

describe('the prebuilt workflow bundle (DATUM_WORKFLOW_BUNDLE)', () => {
  /**
   * A worker that must fail at start: its error line, and whether it has exited. The error is
   * what an operator sees; the process is killed after it if still there (a worker whose start
   * fails after connecting can stay up with its connections open: src/cli/commands/worker.ts).
   */
  const startWorker = async (bundle: string) => {
    const child = datum(
      ['worker', '--fleet', fleet.dir, '--data', scratch, '--address', env.address, '--task-queue', 'bundle-check'],
      { [WORKFLOW_BUNDLE_ENV]: bundle, [METRICS_ADDRESS_ENV]: 'off' },
    );
    stopped.add(child);
    const exited = once(child, 'exit') as Promise<[number | null]>;
    const deadline = Date.now() + 60_000;
    while (child.exitCode === null && !/^datum worker: /m.test(output.get(child)!) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    const error = /^datum worker: .*$/m.exec(output.get(child)!)?.[0];
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
    return { error, output: output.get(child)! };
  };

  it('is the code the worker runs: a file that is no bundle is refused', async () => {
    // The worker above converged the node on the bundle scripts/bundle-workflows.mjs wrote; this
    // one is handed a file that throws when loaded, and fails instead of bundling src/workflows.
    const broken = path.join(scratch, 'broken-bundle.js');
    writeFileSync(broken, 'throw new Error("this is not the workflow bundle");\n');
    const { error, output: log } = await startWorker(broken);
    // The SDK reads the file as a bundle (and refuses it: no inline source map), rather than
    // bundling src/workflows as it does without the variable.
    expect(error, log).toMatch(/Workflow Bundle/);
  });

  it('a missing file is refused, naming the variable and the fix', async () => {
    const missingFile = path.join(scratch, 'no-such-bundle.js');
    const { error, output: log } = await startWorker(missingFile);
    expect(error, log).toContain(`no workflow bundle at ${missingFile} (from ${WORKFLOW_BUNDLE_ENV})`);
    expect(error).toContain('scripts/bundle-workflows.mjs');
  });
});

describe(`a real Prometheus ${PROMETHEUS.release} with deploy/prometheus`, () => {
  let prometheus: ChildProcess | undefined;
  let missing: string | undefined;

  beforeAll(async () => {
    const binary = await toolOrReason('prometheus');
    if ('skip' in binary) {
      missing = binary.skip;
      return;
    }
    // The deploy config with each job's discovery replaced by the test's processes.
    const config = parseYaml(readFileSync(PROMETHEUS_FILE, 'utf8')) as {
      global: Record<string, string>;
      rule_files: string[];
      scrape_configs: { job_name: string; [key: string]: unknown }[];
    };
    const targets: Record<string, string> = { 'datum-worker': address.worker, 'datum-agent': address.agent };
    config.global = { scrape_interval: '1s', evaluation_interval: '1s' };
    config.rule_files = config.rule_files.map((f) => path.resolve(path.dirname(PROMETHEUS_FILE), f));
    config.scrape_configs = config.scrape_configs
      .filter((c) => c.job_name in targets)
      .map((c) => ({ job_name: c.job_name, static_configs: [{ targets: [targets[c.job_name]] }] }));
    expect(config.scrape_configs.map((c) => c.job_name).sort()).toEqual(['datum-agent', 'datum-worker']);
    const file = path.join(scratch, 'prometheus.yml');
    writeFileSync(file, stringifyYaml(config));
    prometheus = spawn(
      binary.path,
      [
        `--config.file=${file}`,
        `--storage.tsdb.path=${path.join(scratch, 'tsdb')}`,
        `--web.listen-address=${address.prometheus}`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    output.set(prometheus, '');
    prometheus.stderr!.on('data', (c: Buffer) => output.set(prometheus!, output.get(prometheus!) + c.toString()));
    children.push(prometheus);
    await untilUp('both targets up', async () => {
      const body = (await (await fetch(`http://${address.prometheus}/api/v1/targets`)).json()) as {
        data: { activeTargets: { health: string; labels: { job: string } }[] };
      };
      const up = body.data.activeTargets.filter((t) => t.health === 'up').map((t) => t.labels.job);
      return up.length === 2 ? up : undefined;
    });
    prometheusRuns = true;
  }, INSTALL_TIMEOUT_MS);

  const query = async (expr: string) => {
    const res = await fetch(`http://${address.prometheus}/api/v1/query?query=${encodeURIComponent(expr)}`);
    return (await res.json()) as { status: string; error?: string; data?: { result: unknown[] } };
  };

  it('evaluates every alert rule without error', async (ctx) => {
    ctx.skip(missing !== undefined, missing ?? '');
    const rules = await untilUp('every rule evaluated', async () => {
      const body = (await (await fetch(`http://${address.prometheus}/api/v1/rules`)).json()) as {
        data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
      };
      const all = body.data.groups.flatMap((g) => g.rules);
      return all.length > 0 && all.every((r) => r.health !== 'unknown') ? all : undefined;
    });
    expect(rules.map((r) => r.name).sort()).toEqual(
      alertRules()
        .map((r) => r.alert)
        .sort(),
    );
    for (const r of rules) expect(r, `${r.name}: ${r.lastError ?? ''}`).toMatchObject({ health: 'ok' });
  });

  it('answers every dashboard query, with data for those on exported metrics', async (ctx) => {
    ctx.skip(missing !== undefined, missing ?? '');
    // rate() over 1m needs two samples of each series: a few scrapes at 1 s.
    await new Promise((r) => setTimeout(r, 5000));
    // Empty on a fleet that converged without trouble: nothing refused, nothing open.
    const emptyWhenHealthy = ['Refusals by type', 'Nodes with a condition open (per-node gauge)'];
    for (const { where, expr } of dashboardExpressions()) {
      const answer = await query(expr);
      expect(answer.status, `${where}: ${answer.error ?? ''}`).toBe('success');
      if (emptyWhenHealthy.some((t) => where.includes(`"${t}"`))) continue;
      expect(answer.data!.result.length, `${where} shows data: ${expr}`).toBeGreaterThan(0);
    }
  });

  // An alert whose bucket matches no series never fires, and evaluates "ok" all the same.
  it('selects only histogram buckets Prometheus stored (le="60.0" since Prometheus 3)', async (ctx) => {
    ctx.skip(missing !== undefined, missing ?? '');
    const buckets = [
      ...new Set(allExpressions().flatMap(({ expr }) => [...expr.matchAll(/\w+_bucket\{[^}]*\}/g)].map((m) => m[0]))),
    ];
    expect(buckets.length, 'the alerts and the dashboard select buckets').toBeGreaterThan(0);
    for (const selector of buckets) {
      const answer = await query(`count(${selector})`);
      expect(answer.data?.result.length, `${selector} matches a stored series`).toBeGreaterThan(0);
    }
  });

  it('a watched fleet: DatumFleetUnwatched and DatumControlNotPolled are quiet, and their expressions select stored series', async (ctx) => {
    ctx.skip(missing !== undefined, missing ?? '');
    for (const selector of [
      'datum_fleet_last_look_timestamp_seconds',
      'datum_fleet_look_interval_seconds',
      'temporal_long_request{job="datum-worker", operation="PollWorkflowTaskQueue", task_queue="datum-control"}',
    ]) {
      const answer = await query(`count(${selector})`);
      expect(answer.data?.result.length, `${selector} matches a stored series`).toBeGreaterThan(0);
    }
    const blind = (await alertsNow()).filter((a) =>
      ['DatumFleetUnwatched', 'DatumControlNotPolled'].includes(a.labels.alertname),
    );
    expect(blind).toEqual([]);
    // Its age, as the dashboard's panel shows it: within one interval and the 10 s read.
    const age = await query('time() - max(datum_fleet_last_look_timestamp_seconds)');
    const [, value] = (age.data!.result[0] as { value: [number, string] }).value;
    expect(Number(value)).toBeLessThan(60 + 10 + 5);
  });

  it('an agent that stops is DatumAgentDown (pending its `for`) within seconds', async (ctx) => {
    ctx.skip(missing !== undefined, missing ?? '');
    const agent = children[1];
    expect(await stop(agent), 'the agent exits cleanly on SIGTERM').toBe(0);
    await untilUp(
      'DatumAgentDown pending',
      async () => {
        return (await alertsNow()).find((a) => a.labels.alertname === 'DatumAgentDown' && a.state === 'pending');
      },
      30_000,
    );
    expect(existsSync(path.join(scratch, 'tsdb'))).toBe(true);
  });
});

describe('stopping the worker as compose and systemd do', () => {
  it(`exits 0 on SIGTERM well within the ${SHUTDOWN_BUDGET_S} s they allow before SIGKILL`, async () => {
    const worker = children[0];
    const started = Date.now();
    expect(await stop(worker)).toBe(0);
    expect(Date.now() - started).toBeLessThan(SHUTDOWN_BUDGET_S * 1000);
  });

  it('with no controller worker up, DatumControlNotPolled is pending within seconds', async (ctx) => {
    ctx.skip(!prometheusRuns, 'no Prometheus ran (see the skip above)');
    expect(children[0].exitCode ?? children[0].signalCode, 'the worker stopped').not.toBeNull();
    await untilUp(
      'DatumControlNotPolled pending',
      async () => {
        return (await alertsNow()).find((a) => a.labels.alertname === 'DatumControlNotPolled' && a.state === 'pending');
      },
      30_000,
    );
  });
});
