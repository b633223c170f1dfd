import { type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fileBytes } from '../../src/domain';
import { WORK_ITEMS_METRIC, workItemId, workItemQuery, type WorkItem } from '../../src/contract';
import { listWork } from '../../src/cli/work';
import { installRuntime } from '../../src/worker/metrics';
import { startFleetMetrics } from '../../src/worker/fleet-metrics';
import { freePort } from '../../src/agent/services/launch';
import { startConflictingWriter } from '../helpers/fleet';
import { type Stack, statusesOf, useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { runDatum } from '../helpers/cli';

/*
 * Work items on real processes (issue 20, docs/work-items.md): a dev server, the controller
 * worker, real agents on temp roots, the `datum` CLI as a person runs it, and a resolver program
 * behind `datum work serve --exec`. An item opens when a condition needs judgement, is claimed
 * under a lease, resolved by Update, recorded in the ledger, and closed only by observation. The
 * fleet metric datum_work_items is scraped from this process's own runtime, served as a worker
 * serves it (installRuntime with a metrics address, startFleetMetrics).
 */

let scratch: string;
let metricsAddress: string;
let fleetMetrics: { stop(): void } | undefined;
const children: ChildProcess[] = [];

// Hooks in this order: the runtime before the stack's first connection, scratch removed after the
// stack stopped, the fleet metrics on the stack's client stopped before it (after-hooks run in reverse).
beforeAll(async () => {
  // Before the first connection: this process's runtime serves Prometheus metrics, as a worker's does.
  metricsAddress = `127.0.0.1:${await freePort()}`;
  installRuntime({ metricsAddress, logLevel: 'warn' });
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-work-'));
});
afterAll(async () => {
  await fs.rm(scratch, { recursive: true, force: true });
});
// Short enough that an unclaimed item escalates while the test watches.
const stack = useStack({ controller: { workEscalateAfter: '3s' } });
beforeAll(() => {
  fleetMetrics = startFleetMetrics(stack.client, null, 1000);
});
afterAll(() => {
  fleetMetrics?.stop();
});
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

const datum = (...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir });

/** The item as its workflow holds it: the open one by query, a closed one by its result. */
async function item(id: string): Promise<WorkItem> {
  const handle = stack.client.workflow.getHandle(id);
  const { status } = await handle.describe();
  return status.name === 'RUNNING' ? handle.query(workItemQuery) : ((await handle.result()) as WorkItem);
}

const listed = (id: string) =>
  until(() => listWork(stack.client), {
    what: `${id} to be listed`,
    accept: (rows) => rows.some((r) => r.id === id),
    errors: 'retry',
  });

async function enforcing(node: string, options: Parameters<Stack['fleet']['writeDesired']>[2] = {}) {
  await stack.fleet.writeDesired(node, 1, options);
  await stack.fleet.writeAgent(node, { mode: 'enforce' });
  await stack.startAgent(node);
  return stack.startNode(node, 1);
}

describe('a conflict, resolved by a program', () => {
  it('opens a work item; `datum work serve --exec` claims it and retakes; the next observation closes it', async () => {
    const node = 'W-1';
    const loop = await enforcing(node);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    const config = path.join(stack.fleet.root(node), 'etc/app/config.json');
    const writer = startConflictingWriter(config, fileBytes({ workers: 2 }));
    children.push(writer);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONFLICT');

    const id = workItemId(node, 'CONFLICTING_WRITER', 'config');
    const open = await until(() => item(id), {
      what: `${id} to be open`,
      accept: (i) => i.state === 'OPEN' || i.state === 'ESCALATED',
      errors: 'retry',
    });
    expect(open).toMatchObject({
      node,
      condition: 'CONFLICTING_WRITER',
      resource_key: 'config',
      resolver: 'operator',
      loop: loop.workflowId,
    });
    expect(open.allowed.map((a) => [a.resolution, a.refused])).toEqual([
      ['retake', null],
      ['yield', null],
    ]);
    expect((open.evidence as { sequence: unknown[] }).sequence.length).toBeGreaterThanOrEqual(2);
    expect(open.ledger.map((l) => l.status)).toContain('CONFLICT');

    // The other writer is stopped; the resolver program answers retake, and keeps what it was given.
    writer.kill('SIGKILL');
    const seen = path.join(scratch, 'seen.json');
    const resolver = path.join(scratch, 'resolver.sh');
    await fs.writeFile(
      resolver,
      `#!/bin/sh\ncat > ${seen}\necho '{"resolution": "retake", "note": "the tuning cron is gone"}'\n`,
      { mode: 0o755 },
    );
    await listed(id);
    const served = await datum('work', 'serve', '--exec', resolver, '--by', 'resolver-bot', '--node', node, '--once');
    expect(served.stderr).toBe('');
    expect(served.code).toBe(0);
    expect(JSON.parse(served.stdout.trim().split('\n').pop()!)).toMatchObject({
      item: id,
      outcome: 'resolved',
      resolution: 'retake',
    });
    const given = JSON.parse(await fs.readFile(seen, 'utf8')) as WorkItem;
    expect(given).toMatchObject({ id, state: 'CLAIMED', claim: { by: 'resolver-bot' } });

    // Closed by the observation after it: the loop repaired, and the item says so.
    const closed = await until(() => item(id), { what: `${id} to close`, accept: (i) => i.state === 'CLOSED', errors: 'retry' });
    expect(closed.resolutions).toHaveLength(1);
    expect(closed.resolutions[0]).toMatchObject({ resolution: 'retake', by: 'resolver-bot', outcome: 'cleared' });
    expect(closed.resolutions[0].identity).toMatch(/@/); // the identity Temporal recorded for the resolve Update
    expect(closed.closed?.detail).toMatch(/shows CONFLICTING_WRITER on "config" of W-1 cleared, after resolver-bot's retake/);
    const ledger = await stack.ledger(loop);
    const noted = ledger.find((e) => e.reason === 'OPERATOR_RESOLUTION_RECORDED')!;
    expect(noted.reason_detail).toMatch(
      /^resolver-bot \(.+@.+\) resolved CONFLICTING_WRITER on "config" by retake \(the tuning cron is gone\)/,
    );
    expect(statusesOf(ledger.filter((e) => e.seq > noted.seq))).toContain('CONVERGED/CONVERGED_AFTER_REPAIR');
    expect(await fs.readFile(config, 'utf8')).toBe(fileBytes({ workers: 8 }));
    await loop.terminate('test done');
  });
});

describe('two resolvers racing, by the CLI', () => {
  it('one claim wins; the winner yields; the ledger records who (declared name and recorded identity); the next observation closes the item', async () => {
    const node = 'W-4';
    const loop = await enforcing(node);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    const config = path.join(stack.fleet.root(node), 'etc/app/config.json');
    children.push(startConflictingWriter(config, fileBytes({ workers: 2 })));
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONFLICT');
    const id = workItemId(node, 'CONFLICTING_WRITER', 'config');
    await until(() => item(id), {
      what: `${id} to be open`,
      accept: (i) => i.state === 'OPEN' || i.state === 'ESCALATED',
      errors: 'retry',
    });

    // Two people claim at once: one wins, the other is told who holds it.
    const claims = await Promise.all(['alice', 'bob'].map((by) => datum('work', 'claim', id, '--by', by, '-o', 'json')));
    const won = claims.filter((c) => c.code === 0);
    expect(won).toHaveLength(1);
    const winner = (JSON.parse(won[0].stdout) as WorkItem).claim!.by;
    const loser = winner === 'alice' ? 'bob' : 'alice';
    expect(claims.find((c) => c.code !== 0)!.stderr).toMatch(new RegExp(`claim refused: ${id} is claimed by ${winner} `));

    // The loser cannot resolve under the winner's claim; the winner yields to the other writer.
    const lost = await datum('work', 'resolve', id, '--resolution', 'retake', '--by', loser);
    expect(lost.code).toBe(1);
    expect(lost.stderr).toMatch(new RegExp(`resolve refused: ${id} is claimed by ${winner} `));
    const yielded = await datum(
      'work',
      'resolve',
      id,
      '--resolution',
      'yield',
      '--by',
      winner,
      '--note',
      'the tuning cron stays',
    );
    expect([yielded.code, yielded.stderr]).toEqual([0, '']);

    const closed = await until(() => item(id), { what: `${id} to close`, accept: (i) => i.state === 'CLOSED', errors: 'retry' });
    expect(closed.resolutions.map((r) => [r.resolution, r.by, r.outcome])).toEqual([['yield', winner, 'cleared']]);
    const ledger = await stack.ledger(loop);
    const recorded = ledger.filter((e) => e.work_resolution);
    expect(recorded.map((e) => e.work_resolution)).toEqual([
      {
        item_id: id,
        condition: 'CONFLICTING_WRITER',
        resource_key: 'config',
        resolution: 'yield',
        attempts: null,
        by: winner,
        identity: expect.stringMatching(/@/) as unknown,
        note: 'the tuning cron stays',
      },
    ]);
    expect(recorded[0].reason).toBe('OPERATOR_RESOLUTION_RECORDED');
    // Closed by the pass after the resolution, on a fresh observation, not by the resolution.
    expect(closed.closed!.ledger_seq).toBeGreaterThan(recorded[0].seq);
    const closing = ledger.find((e) => e.seq === closed.closed!.ledger_seq)!;
    expect([closing.observation_fresh, closing.conditions.map((c) => c.type)]).toEqual([true, []]);
    await loop.terminate('test done');
  });
});

describe("a new generation's loop", () => {
  it('finds the open items the loop before it opened, and its fresh observation closes the one whose condition is gone', async () => {
    const node = 'W-5';
    const gen1 = await enforcing(node);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    // Observe mode, and a hand edit: drift Datum only reports, an item for a person.
    await stack.fleet.writeAgent(node, { mode: 'observe' });
    const config = path.join(stack.fleet.root(node), 'etc/app/config.json');
    await fs.writeFile(config, fileBytes({ workers: 2 }));
    const id = workItemId(node, 'OBSERVED_DRIFT', 'config');
    await until(() => item(id), {
      what: `${id} to be open on generation 1`,
      accept: (i) => i.loop === gen1.workflowId && i.state !== 'CLOSED',
      errors: 'retry',
    });
    await gen1.terminate('next generation');

    // Generation 2 declares what the node has: its first fresh observation shows no drift on config.
    await stack.fleet.writeDesired(node, 2, { workers: 2 });
    const gen2 = await stack.startNode(node, 2);
    const closed = await until(() => item(id), { what: `${id} to close`, accept: (i) => i.state === 'CLOSED', errors: 'retry' });
    expect(closed.loop).toBe(gen2.workflowId);
    expect(closed.resolutions).toEqual([]);
    expect(closed.closed?.detail).toMatch(
      new RegExp(
        `^A fresh observation \\(${gen2.workflowId} #\\d+, .+\\) shows OBSERVED_DRIFT on "config" of W-5 cleared, before anyone resolved it\\.$`,
      ),
    );
    await gen2.terminate('test done');
  });
});

/** A service of this test's own: it reports its real build only once `fixed` exists on the host. */
async function fixableService(fixed: string): Promise<string> {
  const dir = path.join(scratch, 'fixable');
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(
    path.join(dir, 'server.js'),
    `'use strict';
const fs = require('node:fs'), http = require('node:http'), path = require('node:path'), crypto = require('node:crypto');
const real = JSON.parse(fs.readFileSync(path.join(__dirname, 'build.json'), 'utf8')).build;
const build = fs.existsSync(${JSON.stringify(fixed)}) ? real : 'broken';
const sha = crypto.createHash('sha256').update(fs.readFileSync(process.env.DATUM_CONFIG)).digest('hex');
http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify({ build, config_sha256: sha })); })
  .listen(Number(process.env.PORT), '127.0.0.1');
`,
  );
  return dir;
}

describe('a repair episode past policy.repair_deadline (real processes)', () => {
  it('a service that never reports its build: BLOCKED/REPAIR_DEADLINE_EXCEEDED with budget left, nothing tried after, a work item open', async () => {
    const node = 'W-6';
    // Never fixed: the service answers build "broken" however often it is restarted. Retries 1s,
    // 2s, 4s, 4s, 4s apart (FAST_POLICY's backoff) span 15s; the deadline is 5s.
    const art = await stack.fleet.artifactFrom('7.4', 'fixable', await fixableService(path.join(scratch, 'W-6-never')));
    const loop = await enforcing(node, { artifact: art.name, policy: { retry_budget: 6, repair_deadline: '5s' } });
    const blocked = await stack.waitFor(loop, (s) => s.reason === 'REPAIR_DEADLINE_EXCEEDED', 90_000);
    expect(blocked.convergence_status).toBe('BLOCKED');
    expect(blocked.attempt_count).toBeLessThan(6);
    const opened = await until(() => item(workItemId(node, 'REPAIR_DEADLINE_EXCEEDED', 'app')), {
      what: 'the REPAIR_DEADLINE_EXCEEDED item to open',
      accept: (i) => i.state === 'OPEN' || i.state === 'ESCALATED',
      errors: 'retry',
    });
    expect(opened.allowed.map((a) => a.resolution)).toEqual(['grant', 'hold']);
    // Three more resync passes (1s apart) observe and authorize nothing: no entry after the
    // deadline's carries an action, and the attempts stay where the deadline stopped them.
    await stack.waitForPasses(loop, 3);
    expect((await stack.waitFor(loop, () => true)).attempt_count).toBe(blocked.attempt_count);
    const ledger = await stack.ledger(loop);
    const first = ledger.findIndex((e) => e.reason === 'REPAIR_DEADLINE_EXCEEDED');
    expect(ledger[first].repair_episode).toMatchObject({ repair_deadline: '5s' });
    expect(ledger.slice(first + 1).flatMap((e) => e.execution_evidence)).toEqual([]);
    expect(ledger.slice(0, first).every((e) => e.convergence_status === 'RETRY')).toBe(true);
  });
});

describe('a spent retry budget, resolved by a person', () => {
  it('a grant that does not fix the node reopens the item; the next grant, after the fix, closes it', async () => {
    const node = 'W-2';
    const fixed = path.join(scratch, 'W-2-fixed');
    const art = await stack.fleet.artifactFrom('7.4', 'fixable', await fixableService(fixed));
    const loop = await enforcing(node, { artifact: art.name, policy: { retry_budget: 1 } });
    await stack.waitFor(loop, (s) => s.reason === 'RETRY_BUDGET_EXHAUSTED', 90_000);
    const id = workItemId(node, 'RETRY_BUDGET_EXHAUSTED', 'app');
    await until(() => item(id), {
      what: `${id} to be open`,
      accept: (i) => i.state === 'OPEN' || i.state === 'ESCALATED',
      errors: 'retry',
    });

    // Granted once, without the fix: the repair does not take, and the fresh observation reopens the item.
    const grant = (note: string, ...more: string[]) =>
      datum('work', 'resolve', id, '--resolution', 'grant', '--attempts', '1', '--by', 'alice', '--note', note, ...more);
    const first = await grant('one more try');
    expect(first.stderr).toBe('');
    expect(first.stdout).toMatch(
      new RegExp(
        `^${id}: AWAITING_OBSERVATION\\n  ledger #\\d+: alice \\(.+\\) resolved RETRY_BUDGET_EXHAUSTED on "app" by granting 1 more attempt\\(s\\) \\(one more try\\)`,
      ),
    );
    const reopened = await until(() => item(id), { what: `${id} to reopen`, accept: (i) => i.reopened === 1, errors: 'retry' });
    expect(reopened).toMatchObject({ state: 'OPEN', claim: null, resolution: null });
    expect(reopened.resolutions.map((r) => [r.resolution, r.by, r.outcome])).toEqual([['grant', 'alice', 'not cleared']]);
    expect(reopened.message).toMatch(/Repair of "app" did not take/);

    // The person fixes the host, claims the item and grants again: the repair takes, and the item closes.
    await fs.writeFile(fixed, 'yes\n');
    expect((await datum('work', 'claim', id, '--by', 'alice')).code).toBe(0);
    const second = await grant('host fixed', '-o', 'json');
    expect(second.code).toBe(0);
    expect((JSON.parse(second.stdout) as { item: WorkItem }).item.state).toBe('AWAITING_OBSERVATION');
    const closed = await until(() => item(id), {
      what: `${id} to close`,
      accept: (i) => i.state === 'CLOSED',
      errors: 'retry',
      timeoutMs: 90_000,
    });
    expect(closed.resolutions.map((r) => r.outcome)).toEqual(['not cleared', 'cleared']);
    const state = await stack.state(loop);
    expect([state.convergence_status, state.conditions]).toEqual(['CONVERGED', []]);
    await loop.terminate('test done');
  });
});

describe('claims and refusals', () => {
  it('an expired claim is reclaimable; a resolution the condition does not take is refused and records nothing; an unclaimed item escalates', async () => {
    const node = 'W-3';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node, { mode: 'observe' });
    await stack.startAgent(node);
    const loop = await stack.startNode(node, 1);
    await stack.waitFor(loop, (s) => s.convergence_status === 'DRIFTED');
    const id = workItemId(node, 'OBSERVED_DRIFT', 'config');
    await until(() => item(id), { what: `${id} to escalate`, accept: (i) => i.state === 'ESCALATED', errors: 'retry' }); // unclaimed past the controller's 3s
    await until(() => listWork(stack.client, { states: ['ESCALATED'] }), {
      what: `${id} to be listed as ESCALATED`,
      accept: (rows) => rows.some((r) => r.id === id),
      errors: 'retry',
    });
    // The fleet metric the DatumWorkItemsEscalated alert reads counts it.
    await until(() => escalatedGauge(), { what: 'the escalated gauge to count it', accept: (n) => n >= 1, errors: 'retry' });

    expect((await datum('work', 'claim', id, '--by', 'bob', '--lease', '15s')).code).toBe(0);
    const taken = await datum('work', 'claim', id, '--by', 'carol');
    expect(taken.code).toBe(1);
    expect(taken.stderr).toMatch(
      new RegExp(
        `claim refused: ${id} is claimed by bob \\(.+\\) until .+ — fix: wait for the lease to end, or ask bob to release it`,
      ),
    );
    await until(() => item(id), { what: `${id}'s claim to end`, accept: (i) => i.claim === null, errors: 'retry' }); // the lease's timer ended it
    const reclaimed = await datum('work', 'claim', id, '--by', 'carol', '-o', 'json');
    expect(reclaimed.code).toBe(0);
    expect((JSON.parse(reclaimed.stdout) as WorkItem).claim?.by).toBe('carol');

    const entries = (await stack.ledger(loop)).length;
    const before = await item(id);
    const refused = await datum('work', 'resolve', id, '--resolution', 'retake', '--by', 'carol');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/resolve refused: retake is not a resolution of OBSERVED_DRIFT — fix: choose one of: hold \(/);
    const after = await item(id);
    expect([after.state, after.resolutions, after.claim?.by]).toEqual([before.state, [], 'carol']);
    expect((await stack.ledger(loop)).length).toBe(entries);
    await loop.terminate('test done');
  });
});

/** datum_work_items{state="ESCALATED"} as this process's Prometheus endpoint serves it. */
async function escalatedGauge(): Promise<number> {
  const text = await (await fetch(`http://${metricsAddress}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${WORK_ITEMS_METRIC}{`) && l.includes('state="ESCALATED"'));
  return line ? Number(line.split(' ').pop()) : 0;
}
