import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileWorkflowId, rolloutWorkflowId, stateQuery } from '../../src/contract';
import { stopServices } from '../../src/agent/services';
import { workflowInterceptorModules } from '../../src/worker/bundle';
import { workflowsPath } from '../../src/worker/paths';
import { tracingWorkerOptions } from '../../src/tracing';
import { Fleet } from '../helpers/fleet';
import { startDevEnv } from '../helpers/temporal';
import { until } from '../helpers/until';
import { DatumProcess, OtlpReceiver, closedPort, type ReceivedSpan } from './helpers';
import { runDatum } from '../helpers/cli';
import { startTogether } from '../helpers/processes';

/*
 * OpenTelemetry across real processes: the `datum` CLI, a `datum worker` and a `datum agent`,
 * each exporting to a small OTLP/HTTP receiver in this test (JSON bodies: what Datum's exporter
 * sends, and what a collector's or Jaeger's port 4318 takes). One `datum rollout start` makes
 * one trace, down to the agent's observe, apply and probe. Then the same loop with a collector
 * that is not there, and an endpoint that is not a URL: warnings, and the loop goes on.
 */

let env: TestWorkflowEnvironment;
let fleet: Fleet;
let receiver: OtlpReceiver;
const processes: DatumProcess[] = [];

const datum = (args: string[], extra: Record<string, string | undefined>) =>
  runDatum(args, { TEMPORAL_ADDRESS: env.address, ...extra });

function startDatum(args: string[], extra: NodeJS.ProcessEnv): DatumProcess {
  const p = new DatumProcess(args, { TEMPORAL_ADDRESS: env.address, DATUM_LOG_FORMAT: 'json', ...extra });
  processes.push(p);
  return p;
}

async function startWorkerAndAgent(node: string, workerEnv: NodeJS.ProcessEnv, agentEnv: NodeJS.ProcessEnv) {
  const worker = startDatum(['worker', '--fleet', fleet.dir, '--data', path.join(fleet.dir, 'data')], workerEnv);
  const agent = startDatum(['agent', '--config', fleet.agentFile(node)], agentEnv);
  await until(() => [worker, agent].every((p) => p.lines().some((l) => /^datum (worker|agent): /.test(l))), {
    what: 'the worker and the agent to start',
  });
  return { worker, agent };
}

/** Agent observations the node's loop has scheduled so far (one per pass, and one more per probe). */
/** The passes a loop has recorded (its state's passes.done): a resync pass schedules no observe of its own. */
async function passesRecorded(node: string, generation: number): Promise<number> {
  const state = await env.client.workflow.getHandle(reconcileWorkflowId(node, generation)).query(stateQuery);
  return state.passes?.done ?? 0;
}

beforeAll(async () => {
  [env, fleet, receiver] = await startTogether([startDevEnv(), Fleet.create('datum-tracing-'), OtlpReceiver.start()]);
}, 120_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  for (const node of ['T-1', 'T-2']) await stopServices(fleet?.root(node) ?? '/nonexistent').catch(() => undefined);
  await env?.teardown();
  await receiver?.close();
  await fleet?.remove();
}, 60_000);

describe('one trace from `datum rollout start` to the node', () => {
  // Every process exports only when it stops (the batch delay is longer than the test): the
  // spans the receiver holds at the end are the ones each flushed on its way out.
  const OTEL = () => ({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY: '600000' });
  let started: Awaited<ReturnType<typeof datum>>;
  let beforeStop: { cli: number; others: number };
  let passes: { atConvergence: number; atStop: number };
  let exits: Array<number | null>;
  let agent: DatumProcess;

  beforeAll(async () => {
    await fleet.writeDesired('T-1', 1);
    await fleet.writeAgent('T-1', { mode: 'enforce' });
    let worker: DatumProcess;
    ({ worker, agent } = await startWorkerAndAgent('T-1', OTEL(), OTEL()));

    started = await datum(['rollout', 'start', '--generation', '1', '--nodes', 'T-1', '--wait', '--timeout', '2m'], OTEL());
    passes = { atConvergence: await passesRecorded('T-1', 1), atStop: 0 };
    // The loop goes on (a resync a second): three more passes, none of them in the trace.
    await until(async () => (await passesRecorded('T-1', 1)) >= passes.atConvergence + 3, { what: 'three more passes' });
    passes.atStop = await passesRecorded('T-1', 1);
    const count = (service: string) => receiver.spans.filter((s) => s.service === service).length;
    beforeStop = { cli: count('datum-cli'), others: count('datum-worker') + count('datum-agent') };

    // The agent first (its watch is still running, in the trace), then the worker.
    exits = [await agent.stop(), await worker.stop()];
  }, 240_000);

  const named = (name: string) => receiver.spans.filter((s) => s.name === name);
  const only = (name: string): ReceivedSpan => {
    const found = named(name);
    expect(found.map((s) => s.name)).toEqual([name]);
    return found[0];
  };

  it('the rollout converged, and every process flushed its spans as it stopped', () => {
    expect(started.stderr).toBe('');
    expect(started.code).toBe(0);
    expect(started.stdout).toMatch(/T-1\s+CONVERGED/);
    expect(receiver.rejected).toEqual([]);
    // The CLI had exited: its spans were in. The worker's and the agent's came with their stop.
    expect(beforeStop.cli).toBeGreaterThan(0);
    expect(beforeStop.others).toBe(0);
    expect(exits).toEqual([0, 0]);
    expect(new Set(receiver.spans.map((s) => s.service))).toEqual(new Set(['datum-cli', 'datum-worker', 'datum-agent']));
  });

  it('is one trace: the CLI command at the root, the workflows under it, the agent activities under the reconcile workflow', () => {
    const root = only('datum rollout start');
    expect(root).toMatchObject({ service: 'datum-cli', parentSpanId: null, attributes: { 'datum.command': 'rollout start' } });
    // Nothing else started a trace: not the worker's visibility calls, not the loop's later passes.
    expect(new Set(receiver.spans.map((s) => s.traceId))).toEqual(new Set([root.traceId]));

    const toReconcile = [
      'datum-cli datum rollout start',
      'datum-cli StartWorkflow:rollout',
      'datum-worker RunWorkflow:rollout',
      'datum-worker StartActivity:prepareRolloutNodes',
      'datum-worker RunActivity:prepareRolloutNodes',
      'datum-worker StartWorkflow:reconcileNode',
      'datum-worker RunWorkflow:reconcileNode',
    ];
    const reconcile = only('RunWorkflow:reconcileNode');
    expect(receiver.lineage(reconcile)).toEqual(toReconcile);
    expect(reconcile.attributes).toMatchObject({ workflowId: reconcileWorkflowId('T-1', 1), workflowType: 'reconcileNode' });
    expect(only('RunWorkflow:rollout').attributes).toMatchObject({ workflowId: rolloutWorkflowId(1, ['T-1']) });

    // The pass, in order: observe and the four applies; the last apply takes the probe (an observe
    // after acting) in a span of its own under the apply's.
    const agentCalls = receiver
      .children(reconcile)
      .filter((s) => /^StartActivity:(observe|apply)$/.test(s.name))
      .map((s) => s.name);
    expect(agentCalls).toEqual([
      'StartActivity:observe',
      'StartActivity:apply',
      'StartActivity:apply',
      'StartActivity:apply',
      'StartActivity:apply',
    ]);
    for (const kind of ['observe', 'apply']) {
      const executions = named(`RunActivity:${kind}`);
      expect(executions.length).toBe(kind === 'observe' ? 1 : 4);
      for (const s of executions) {
        expect(receiver.lineage(s)).toEqual([
          ...toReconcile,
          `datum-worker StartActivity:${kind}`,
          `datum-agent RunActivity:${kind}`,
        ]);
        expect(s.attributes).toMatchObject({ temporalWorkflowId: reconcileWorkflowId('T-1', 1) });
      }
    }
    const probe = only('probe');
    expect(receiver.lineage(probe)).toEqual([
      ...toReconcile,
      'datum-worker StartActivity:apply',
      'datum-agent RunActivity:apply',
      'datum-agent probe',
    ]);
    // The watch the pass left running ended when the agent stopped: flushed on the way out.
    expect(named('RunActivity:watch').map((s) => s.service)).toEqual(['datum-agent']);
  });

  it('traces the first pass only: later passes ran, and are not in the trace', () => {
    expect(passes.atStop).toBeGreaterThanOrEqual(passes.atConvergence + 3);
    expect(named('RunActivity:observe').length).toBe(1);
    expect(named('StartActivity:observe').length).toBe(1);
    expect(named('probe').length).toBe(1);
  });

  it("workflow spans name their run, never the workflow's memo or search attributes", () => {
    const fromWorkflows = receiver.spans.filter((s) => /^(RunWorkflow|StartActivity):/.test(s.name));
    expect(fromWorkflows.length).toBeGreaterThan(0);
    for (const s of fromWorkflows)
      for (const key of Object.keys(s.attributes))
        expect(['workflowId', 'runId', 'workflowType', 'taskQueue', 'namespace'], `${s.name} ${key}`).toContain(key);
  });

  it("the agent's apply log lines carry the trace id", () => {
    const root = only('datum rollout start');
    const applies = agent.logLines().filter((l) => l.msg === 'apply applied');
    expect(applies.length).toBe(4);
    for (const l of applies) expect(l.trace_id).toBe(root.traceId);
  });

  it('the traced histories replay without non-determinism', async () => {
    const ids = [rolloutWorkflowId(1, ['T-1']), reconcileWorkflowId('T-1', 1)];
    const histories = await Promise.all(
      ids.map(async (workflowId) => ({ workflowId, history: await env.client.workflow.getHandle(workflowId).fetchHistory() })),
    );
    const failures: string[] = [];
    for await (const result of Worker.runReplayHistories(
      {
        workflowsPath: workflowsPath(),
        interceptors: { workflowModules: workflowInterceptorModules({ tracing: true }) },
        sinks: tracingWorkerOptions(undefined).sinks,
      },
      histories,
    ))
      if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
    expect(failures).toEqual([]);
  });
});

describe('a collector that is not there, an endpoint that is not a URL', () => {
  let closed: string;
  let started: Awaited<ReturnType<typeof datum>>;
  let worker: DatumProcess;
  let agent: DatumProcess;
  let passes: { atConvergence: number; later: number };

  beforeAll(async () => {
    await env.client.workflow.getHandle(reconcileWorkflowId('T-1', 1)).terminate('the first part of the test is done');
    closed = `http://127.0.0.1:${await closedPort()}`;
    await fleet.writeDesired('T-2', 1);
    await fleet.writeAgent('T-2', { mode: 'enforce' });
    // The worker and the CLI export to a port nothing listens on; the agent's endpoint is no URL.
    const unreachable = { OTEL_EXPORTER_OTLP_ENDPOINT: closed, OTEL_BSP_SCHEDULE_DELAY: '200' };
    ({ worker, agent } = await startWorkerAndAgent('T-2', unreachable, { OTEL_EXPORTER_OTLP_ENDPOINT: 'localhost:4318' }));
    started = await datum(['rollout', 'start', '--generation', '1', '--nodes', 'T-2', '--wait', '--timeout', '2m'], unreachable);
    passes = { atConvergence: await passesRecorded('T-2', 1), later: 0 };
    await until(async () => (await passesRecorded('T-2', 1)) >= passes.atConvergence + 2, { what: 'two more passes' });
    passes.later = await passesRecorded('T-2', 1);
    await until(() => warnings(worker).length > 0, { what: 'the worker to have tried to export', timeoutMs: 30_000 });
  }, 240_000);

  const warnings = (p: DatumProcess) => p.logLines().filter((l) => l.level === 'warn' && /OTEL|traces/.test(String(l.msg)));

  it('the node converges and the loop goes on', () => {
    expect(started.code).toBe(0);
    expect(started.stdout).toMatch(/T-2\s+CONVERGED/);
    expect(passes.later).toBeGreaterThanOrEqual(passes.atConvergence + 2);
  });

  it('the worker warns once, naming the endpoint and the fix', async () => {
    // More exports have failed since (a batch every 200 ms while spans come): still one line.
    await new Promise((r) => setTimeout(r, 1000));
    expect(warnings(worker).map((l) => l.msg)).toEqual([
      `cannot export traces to ${closed}/v1/traces (from OTEL_EXPORTER_OTLP_ENDPOINT): connect ECONNREFUSED ${closed.replace('http://', '')}; spans are dropped until it answers, and nothing else stops — fix: start the collector there, or correct OTEL_EXPORTER_OTLP_ENDPOINT (unset it to turn tracing off)`,
    ]);
    expect(warnings(worker)[0]).toMatchObject({ otlp_endpoint: `${closed}/v1/traces` });
  });

  it('the CLI says the same on stderr, once, and exits as the rollout says', () => {
    const lines = started.stderr.split('\n').filter((l) => l.startsWith('datum: warning: '));
    expect(lines).toEqual([
      `datum: warning: cannot export traces to ${closed}/v1/traces (from OTEL_EXPORTER_OTLP_ENDPOINT): connect ECONNREFUSED ${closed.replace('http://', '')}; spans are dropped until it answers, and nothing else stops — fix: start the collector there, or correct OTEL_EXPORTER_OTLP_ENDPOINT (unset it to turn tracing off)`,
    ]);
  });

  it('an endpoint that is not a URL is a warning at start naming the variable; the agent serves untraced', () => {
    expect(warnings(agent).map((l) => l.msg)).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT "localhost:4318" is not an http:// or https:// URL, so tracing is off — fix: give the collector\'s OTLP/HTTP address, e.g. http://localhost:4318, or unset OTEL_EXPORTER_OTLP_ENDPOINT',
    ]);
    expect(agent.logLines().filter((l) => l.msg === 'apply applied').length).toBe(4);
  });
});
