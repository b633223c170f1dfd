import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  stateQuery,
  type ReconcileNodeWorkflow,
} from '../../src/contract';
import { Fleet } from '../helpers/fleet';
import { startDevEnv } from '../helpers/temporal';
import { until } from '../helpers/until';
import { startTogether } from '../helpers/processes';
import { DATUM } from '../helpers/cli';

/*
 * The structured logs of a real `datum worker` and a real `datum agent` process (DATUM_LOG_FORMAT=json,
 * the default): every line they write is one JSON object, the SDK's own lines among them, and the
 * agent's apply lines carry the node, resource, generation and idempotency key with the
 * workflow that asked.
 */

let env: TestWorkflowEnvironment;
let fleet: Fleet;
const children: Array<{ child: ChildProcess; out: string[] }> = [];

function start(args: string[], extra: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [DATUM, ...args], {
    env: { ...process.env, TEMPORAL_ADDRESS: env.address, DATUM_LOG_FORMAT: 'json', DATUM_LOG_LEVEL: 'debug', ...extra },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  child.stdout.on('data', (d: Buffer) => out.push(d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => out.push(d.toString('utf8')));
  children.push({ child, out });
  return out;
}

const linesOf = (out: string[]) =>
  out
    .join('')
    .split('\n')
    .filter((l) => l.trim() !== '');

/** The JSON lines: every line but the one-line start-up banner ("datum worker: …", "datum agent: …"). */
function jsonLines(out: string[]): Array<Record<string, unknown>> {
  return linesOf(out)
    .filter((l) => !/^datum (worker|agent): /.test(l))
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON line: ${l}`);
      }
    });
}

let workerOut: string[];
let agentOut: string[];

beforeAll(async () => {
  [env, fleet] = await startTogether([startDevEnv(), Fleet.create()]);
  await fleet.writeDesired('L-1', 1, { version: '7.4' });
  await fleet.writeAgent('L-1', { mode: 'enforce' });
  workerOut = start(['worker', '--fleet', fleet.dir, '--data', path.join(fleet.dir, 'data')]);
  agentOut = start(['agent', '--config', fleet.agentFile('L-1')]);
  await until(
    () =>
      linesOf(workerOut).some((l) => l.startsWith('datum worker: ')) &&
      linesOf(agentOut).some((l) => l.startsWith('datum agent: ')),
    { what: 'the worker and the agent to start' },
  );
  const handle = await env.client.workflow.start<ReconcileNodeWorkflow>(WORKFLOW_TYPES.reconcileNode, {
    taskQueue: CONTROL_TASK_QUEUE,
    workflowId: reconcileWorkflowId('L-1', 1),
    args: [{ node: 'L-1', generation: 1 }],
  });
  await until(async () => (await handle.query(stateQuery).catch(() => null))?.convergence_status === 'CONVERGED', {
    what: 'L-1 to converge',
    timeoutMs: 90_000,
  });
  await handle.terminate('test done');
  // The agent's lines reach this process through a pipe, after the loop may have seen the node
  // converge: wait for the four applies' lines rather than racing them.
  await until(
    () => {
      const lines = linesOf(agentOut).filter((l) => l.includes('"apply applied"'));
      return lines.length >= 4;
    },
    { what: 'the agent to log its four applies' },
  );
}, 180_000);

afterAll(async () => {
  for (const { child } of children) child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1000));
  spawnSync('pkill', ['-f', fleet?.dir ?? 'never-matches-anything']);
  await env?.teardown();
  await fleet?.remove();
}, 60_000);

describe('structured logs', () => {
  it("the agent's lines are JSON, and each apply names the node, resource, generation, idempotency key and the workflow that asked", () => {
    const lines = jsonLines(agentOut);
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect([typeof l.level, typeof l.time, typeof l.msg]).toEqual(['string', 'string', 'string']);
    const applies = lines.filter((l) => l.msg === 'apply applied');
    expect(applies.map((l) => l.resource_key).sort()).toEqual(['app', 'build', 'config', 'maintenance']);
    for (const a of applies) expect(typeof a.idempotency_key).toBe('string');
    for (const a of applies)
      expect(a).toMatchObject({
        node: 'L-1',
        generation: 1,
        workflowId: reconcileWorkflowId('L-1', 1),
        activityType: 'apply',
        level: 'info',
      });
    expect(lines.some((l) => l.msg === 'observed' && l.level === 'debug' && l.node === 'L-1')).toBe(true);
  });

  it("the worker's lines are JSON, the SDK's own among them", () => {
    const lines = jsonLines(workerOut);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.some((l) => typeof l.sdkComponent === 'string')).toBe(true);
    for (const l of lines) expect(typeof l.msg).toBe('string');
  });

  it('a bad log level or format is refused at start, naming the variable and the values it takes', () => {
    const level = spawnSync(process.execPath, [DATUM, 'agent', '--config', fleet.agentFile('L-1')], {
      env: { ...process.env, TEMPORAL_ADDRESS: env.address, DATUM_LOG_LEVEL: 'loud' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(level.status).not.toBe(0);
    expect(level.stderr).toMatch(
      /DATUM_LOG_LEVEL "loud" is not a log level — fix: use one of trace, debug, info, warn, error, never/,
    );
    const format = spawnSync(process.execPath, [DATUM, 'agent', '--config', fleet.agentFile('L-1')], {
      env: { ...process.env, TEMPORAL_ADDRESS: env.address, DATUM_LOG_FORMAT: 'xml' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(format.status).not.toBe(0);
    expect(format.stderr).toMatch(/DATUM_LOG_FORMAT "xml" is not a log format — fix: use one of json, text/);
  });
});
