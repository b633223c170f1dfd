import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONDITION_TYPES } from '../../src/domain';
import { stopServices } from '../../src/agent/services';
import { METRICS_ADDRESS_ENV, MetricsConfigError, installRuntime } from '../../src/worker/metrics';
import { projectRoot } from '../../src/worker/paths';
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  stateQuery,
  type NodeState,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { Fleet } from '../helpers/fleet';
import { startDevEnv } from '../helpers/temporal';
import { until } from '../helpers/until';
import { startTogether } from '../helpers/processes';

/*
 * Each worker process serves Prometheus metrics: the SDK's runtime metrics and Datum's own, on
 * one endpoint. The SDK runtime is per process, so the real `datum worker` and `datum agent`
 * run as child processes, each told where to serve by DATUM_METRICS_ADDRESS, and are scraped
 * over HTTP after a node converged.
 */

const NODE = 'M-1';
let env: TestWorkflowEnvironment;
let fleet: Fleet;
const children: ChildProcess[] = [];
const output = new Map<ChildProcess, string>();
let workerAddress: string;
let agentAddress: string;

function datum(args: string[], metricsAddress: string | null): ChildProcess {
  const childEnv = { ...process.env };
  delete childEnv[METRICS_ADDRESS_ENV];
  if (metricsAddress) childEnv[METRICS_ADDRESS_ENV] = metricsAddress;
  const child = spawn(process.execPath, [path.join(projectRoot(), 'bin/datum.js'), ...args], {
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

beforeAll(async () => {
  [env, fleet] = await startTogether([startDevEnv(), Fleet.create('datum-metrics-')]);
  await fleet.writeDesired(NODE, 1, { version: '7.4' });
  await fleet.writeAgent(NODE, { mode: 'enforce' });
  [workerAddress, agentAddress] = (await freePorts(2)).map((port) => `127.0.0.1:${port}`);
  datum(['worker', '--fleet', fleet.dir, '--data', fleet.dir, '--address', env.address], workerAddress);
  datum(['agent', '--config', fleet.agentFile(NODE), '--address', env.address], agentAddress);
});

afterAll(async () => {
  await Promise.all(children.map((c) => stop(c)));
  if (fleet) await stopServices(fleet.root(NODE)).catch(() => undefined);
  await env?.teardown();
  await fleet?.remove();
});

describe('Prometheus metrics of the worker processes', () => {
  it('serve the SDK runtime metrics and Datum decisions, conditions, observation age and actions', async () => {
    const workflowId = reconcileWorkflowId(NODE, 1);
    const handle = await env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId,
      args: [{ node: NODE, generation: 1 }],
    });
    const converged = await waitForState(
      () => handle.query(stateQuery),
      (s) => s.convergence_status === 'CONVERGED',
    );
    expect(converged.reason).toBe('CONVERGED_AFTER_REPAIR');
    // Then one steady-state pass (resync 1s): it judges a snapshot but records no decision.
    const state = await waitForState(
      () => handle.query(stateQuery),
      (s) => s.last_verified_at !== converged.last_verified_at,
    );

    const controller = await scrape(workerAddress);
    // The SDK core's own metrics, under its `temporal_` prefix.
    expect(names(controller).filter((n) => n.startsWith('temporal_workflow_task'))).not.toEqual([]);
    expect(
      find(controller, 'temporal_num_pollers', { poller_type: 'workflow_task', task_queue: CONTROL_TASK_QUEUE }).length,
    ).toBeGreaterThan(0);
    // Datum's own, unprefixed, labelled like core's workflow series (snake_case, as on temporal_*).
    const decisions = find(controller, 'datum_decisions_total', { status: 'CONVERGED', reason: 'CONVERGED_AFTER_REPAIR' });
    expect(decisions).toHaveLength(1);
    expect(decisions[0].value).toBeGreaterThanOrEqual(1);
    expect(decisions[0].labels).toMatchObject({
      workflow_type: 'reconcileNode',
      task_queue: CONTROL_TASK_QUEUE,
      namespace: 'default',
    });
    // One count per ledger entry (this worker recorded them all), none for the steady-state pass.
    expect(sum(find(controller, 'datum_decisions_total'))).toBe(state.ledger_entries);
    // Every pass's snapshot age, recorded or not.
    const ageCount = sum(find(controller, 'datum_observation_age_seconds_count'));
    expect(ageCount).toBeGreaterThan(state.ledger_entries);
    expect(find(controller, 'datum_observation_age_seconds_bucket', { le: '+Inf' }).map((s) => s.value)).toEqual([ageCount]);
    const ageSum = sum(find(controller, 'datum_observation_age_seconds_sum'));
    expect(ageSum / ageCount).toBeLessThan(60); // observation_ttl: these snapshots were fresh
    // Every condition type is reported for the node, and their sum is what the state query says is open.
    const open = find(controller, 'datum_open_conditions', { node: NODE });
    expect(new Set(open.map((s) => s.labels.type))).toEqual(new Set(CONDITION_TYPES));
    expect(sum(open)).toBe(state.conditions.length);

    const agent = await scrape(agentAddress);
    expect(names(agent).filter((n) => n.startsWith('temporal_activity_'))).not.toEqual([]);
    const applied = find(agent, 'datum_actions_total', { outcome: 'applied', refusal: 'none' });
    // The demo node from scratch: release installed, config and flag written, service started.
    expect(new Set(applied.map((s) => s.labels.action))).toEqual(
      new Set(['release.install', 'file.write', 'flag.write', 'service.start']),
    );
    expect(applied.every((s) => s.value === 1)).toBe(true);
    expect(applied.every((s) => s.labels.activity_type === 'apply' && s.labels.task_queue === `datum-node-${NODE}`)).toBe(true);
    // Decision metrics come from the controller only, action metrics from the agent only.
    expect(find(agent, 'datum_decisions_total')).toEqual([]);
    expect(find(controller, 'datum_actions_total')).toEqual([]);

    await handle.terminate('test done');
  });

  it('a metrics port already in use stops the process with an error naming the setting to change', async () => {
    const clash = datum(['agent', '--config', fleet.agentFile(NODE), '--address', env.address], workerAddress);
    const [code] = (await once(clash, 'exit')) as [number | null];
    expect(code).toBe(1);
    expect(output.get(clash)).toContain(
      `cannot serve metrics on ${workerAddress} (from ${METRICS_ADDRESS_ENV}): the port is already in use`,
    );
    expect(output.get(clash)).toContain('--metrics-address');
  });

  it('rejects an address core cannot bind, and metrics asked for after the runtime exists', () => {
    expect(() => installRuntime({ metricsAddress: 'metrics.example:9464' })).toThrow(
      /--metrics-address "metrics.example:9464" is not IP:PORT/,
    );
    expect(() => installRuntime({ metricsAddress: '127.0.0.1:0' })).toThrow(MetricsConfigError);
    expect(installRuntime({ metricsAddress: 'off' })).toMatchObject({ metricsAddress: null, metricsUrl: null });
    // This test process's runtime was created by startDevEnv, without metrics.
    expect(() => installRuntime({ metricsAddress: 'localhost:9464' })).toThrow(
      /127\.0\.0\.1:9464 \(from --metrics-address\): this process's Temporal runtime was already created/,
    );
  });
});

// ---------------------------------------------------------------------------------------------

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text exposition format, as far as these assertions need it. */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

const names = (samples: Sample[]) => [...new Set(samples.map((s) => s.name))];
const sum = (samples: Sample[]) => samples.reduce((t, s) => t + s.value, 0);
const find = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

/** GET /metrics; the exporter is up once the process has created its runtime. */
async function scrape(address: string): Promise<Sample[]> {
  const res = await fetch(`http://${address}/metrics`);
  expect(res.status).toBe(200);
  return parse(await res.text());
}

/** Polls the loop's state until `done`; a datum process that exits ends the wait at once, with its output. */
async function waitForState(
  query: () => Promise<NodeState>,
  done: (s: NodeState) => boolean,
  timeoutMs = 90_000,
): Promise<NodeState> {
  return until(query, {
    what: 'the loop’s state',
    accept: done,
    errors: 'retry', // no worker has picked the workflow up yet
    timeoutMs,
    giveUp: () => {
      const exited = children.find((c) => c.exitCode !== null);
      return exited && new Error(`a datum process exited (${exited.exitCode}):\n${output.get(exited)}`);
    },
    context: () => children.map((c) => output.get(c)).join('\n---\n'),
  });
}

/**
 * Ports free right now. Core's exporter cannot bind port 0 and tell us which it got, so ask the
 * OS for ports and hand them over; all are held until all are known, so they differ.
 */
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

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
