import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { sha256Hex, type LedgerEntry } from '../../src/domain';
import { workItemId, workItemQuery } from '../../src/contract';
import { FAST_POLICY, startConflictingWriter } from '../helpers/fleet';
import { statusesOf, useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { changes, daemonUnit, freePort, show, startUnitHost, systemctl, writeDaemon, type UnitHost } from '../agent/unit-host';
import { INSTALL_TIMEOUT_MS } from '../helpers/tools';

/*
 * `unit` resources through the whole loop on real processes: a dev server, the controller worker,
 * an agent on a temp root, and a private systemd --user (test/agent/unit-host.ts) whose units the
 * agent writes, reloads, enables, starts and restarts. Convergence is proven by when each unit's
 * main process started (the ledger names the evidence), a crash is repaired without being taken for
 * a writer, a hand edit long after convergence is drift, another writer who keeps editing Datum's
 * drop-in or disabling the unit is CONFLICT, an adopted unit in observe mode is reported and left
 * alone, a masked unit is a destructive repair handed over as work, and a repair whose every
 * systemctl succeeded while the declared property stays wrong is the seed's probe 4.
 */

const stack = useStack();
let host: UnitHost | { skip: string } = { skip: 'not started yet' };
beforeAll(async () => {
  host = await startUnitHost();
}, INSTALL_TIMEOUT_MS);
afterAll(async () => {
  if ('stop' in host) await host.stop();
}, 60_000);

const H = () => host as UnitHost;
const skipUnless = (ctx: { skip: (cond: boolean, why: string) => void }) =>
  ctx.skip('skip' in host, `no private systemd manager: ${'skip' in host ? host.skip : ''}`);

const children: ChildProcess[] = [];
const handles: WorkflowHandle[] = [];
const units: string[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const h of handles.splice(0)) await h.terminate('test done').catch(() => undefined);
  if (!('stop' in host)) return;
  for (const name of units.splice(0)) {
    systemctl('stop', '--', name);
    systemctl('unmask', '--', name);
    systemctl('disable', '--', name);
    for (const dir of [host.local, host.vendor]) {
      await fs.rm(path.join(dir, name), { force: true });
      await fs.rm(path.join(dir, `${name}.d`), { force: true, recursive: true });
    }
  }
  systemctl('daemon-reload');
});

const CONFIG = 'etc/app/app.conf';
const DROPIN = '[Service]\nEnvironment=GREETING=hello\nRestart=on-failure\n';
const dropinOf = (name: string) => `${name}.d/50-datum.conf`;
const mainPid = (name: string) => Number(show(name, ['MainPID']).MainPID);

interface Node {
  node: string;
  name: string;
  port: number;
  root: string;
}

/** A node whose host runs the test daemon as a vendor unit, with its agent.yaml (units in the private manager). */
async function hostNode(node: string, mode: 'observe' | 'enforce' = 'enforce'): Promise<Node> {
  const name = `demo-${node.toLowerCase()}-${process.pid}.service`;
  units.push(name);
  const root = stack.fleet.root(node);
  await fs.mkdir(root, { recursive: true });
  const port = await freePort();
  const daemon = await writeDaemon(path.dirname(root));
  await fs.writeFile(path.join(H().vendor, name), daemonUnit(daemon, port, path.join(root, CONFIG)));
  const agent = {
    node,
    root,
    reconciliation: { mode, resources: {} },
    overrides: {},
    units: { manager: 'user', directory: H().local },
    allow: { units: ['demo-*.service'], probes: ['http://127.0.0.1:*/health'] },
  };
  await fs.writeFile(stack.fleet.agentFile(node), stringify(agent));
  return { node, name, port, root };
}

/** The desired state of a node: the daemon's config file and its unit with Datum's drop-in. */
function webResources(n: Node, over: Record<string, unknown> = {}) {
  return {
    config: { type: 'file', path: CONFIG, content: 'v1\n' },
    web: {
      type: 'unit',
      name: n.name,
      dropin: DROPIN,
      enabled: true,
      active: true,
      properties: { Restart: 'on-failure' },
      restart_on: ['config'],
      probe: { http: { url: `http://127.0.0.1:${n.port}/health`, body: '"greeting":"hello"' } },
      ...over,
    },
  };
}

async function run(n: Node, resources: Record<string, unknown>, policy: Record<string, unknown> = {}) {
  await fs.writeFile(
    stack.fleet.desiredFile(n.node),
    stringify({ node: n.node, generation: 1, resources, policy: { ...FAST_POLICY, ...policy } }),
  );
  await stack.startAgent(n.node);
  const handle = await stack.startNode(n.node, 1);
  handles.push(handle);
  return handle;
}

const web = (e: LedgerEntry) => e.resources.find((r) => r.resource_key === 'web')!;
/** The unit's value in the entry's post-action observation: the fresh probe that judged the repair. */
const probed = (e: LedgerEntry) =>
  (e.post_action_observation as { resources: Record<string, { value: unknown }> }).resources.web.value;

describe('unit resources through the loop', () => {
  it('converges on evidence the ledger names, and repairs a crash with a start, not as another writer', async (ctx) => {
    skipUnless(ctx);
    const n = await hostNode('U-1');
    const handle = await run(n, webResources(n));
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const ledger = await stack.ledger(handle);
    const repaired = ledger.find((e) => e.reason === 'CONVERGED_AFTER_REPAIR')!;
    expect(repaired.authorized_actions.map((a) => [a.resource_key, a.action])).toEqual([
      ['config', 'file.write'],
      ['web', 'unit.apply'],
    ]);
    const applied = repaired.execution_evidence.find((e) => e.resource_key === 'web')!;
    const pid = mainPid(n.name);
    expect(applied.detail).toMatch(
      new RegExp(
        `then started ${n.name.replace(/\./g, '\\.')}\\. .*; main process ${pid} started .* after ${dropinOf(n.name).replace(/\./g, '\\.')} \\(in place .*\\) and config \\(in place .*\\) \\(ctime\\), with no reload pending; probe: GET .* answered HTTP 200`,
      ),
    );
    expect(probed(repaired)).toEqual({
      dropin_sha256: sha256Hex(DROPIN),
      enabled: true,
      active: true,
      properties: { Restart: 'on-failure' },
      started_after: { [dropinOf(n.name)]: sha256Hex(DROPIN), config: sha256Hex('v1\n') },
      answers: true,
    });

    // The main process dies (SIGKILL is no on-failure restart's business here: Restart counts it, so stop it for good).
    expect(systemctl('kill', '--signal=SIGKILL', '--', n.name).status).toBe(0);
    expect(systemctl('stop', '--', n.name).status).toBe(0);
    const again = await stack.waitFor(handle, (s, l) => s.convergence_status === 'CONVERGED' && l.length > ledger.length);
    expect(again.conditions).toEqual([]);
    const after = await stack.ledger(handle);
    const statuses = statusesOf(after.slice(ledger.length));
    expect(statuses).not.toContain('CONFLICT/CONFLICTING_WRITER');
    expect(statuses).toContain('CONVERGED/CONVERGED_AFTER_REPAIR');
    expect(mainPid(n.name)).not.toBe(pid);
    expect(mainPid(n.name)).toBeGreaterThan(0);
  }, 120_000);

  it('a hand edit of the drop-in after conflict_window is drift: repaired, the edit kept under .datum/backup', async (ctx) => {
    skipUnless(ctx);
    const n = await hostNode('U-2');
    const handle = await run(n, webResources(n), { conflict_window: '2s' });
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    await new Promise((r) => setTimeout(r, 2500));
    const seen = (await stack.ledger(handle)).length;
    const edit = '[Service]\nEnvironment=GREETING=by-hand\n';
    await fs.writeFile(path.join(H().local, dropinOf(n.name)), edit);
    // The ledger, not the state: a resync may say ALREADY_CONVERGED again before a poll sees the repair.
    await stack.waitFor(handle, (_s, l) => l.slice(seen).some((e) => e.reason === 'CONVERGED_AFTER_REPAIR'));
    expect(statusesOf((await stack.ledger(handle)).slice(seen))).not.toContain('CONFLICT/CONFLICTING_WRITER');
    expect(await fs.readFile(path.join(H().local, dropinOf(n.name)), 'utf8')).toBe(DROPIN);
    const backups = await fs.readdir(path.join(n.root, '.datum/backup/units/user', `${n.name}.d`));
    const kept = await Promise.all(
      backups.map((b) => fs.readFile(path.join(n.root, '.datum/backup/units/user', `${n.name}.d`, b), 'utf8')),
    );
    expect(kept).toContain(edit);
  }, 120_000);

  it('another writer who keeps editing Datum’s drop-in is CONFLICT, with the markers as evidence', async (ctx) => {
    skipUnless(ctx);
    const n = await hostNode('U-3');
    const handle = await run(n, webResources(n));
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const theirs = '[Service]\nEnvironment=GREETING=theirs\n';
    children.push(startConflictingWriter(path.join(H().local, dropinOf(n.name)), theirs));
    const conflict = await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');
    expect(conflict).toMatchObject({ reason: 'CONFLICTING_WRITER', recheck_trigger: { trigger: 'OPERATOR_RESOLUTION' } });
    expect(conflict.conditions.map((c) => [c.type, c.resource_key])).toEqual([['CONFLICTING_WRITER', 'web']]);
    const entry = (await stack.ledger(handle)).find((e) => e.convergence_status === 'CONFLICT')!;
    const sequence = entry.conflicting_writer_evidence!.find((e) => e.resource_key === 'web')!.sequence;
    expect(sequence.length).toBeGreaterThanOrEqual(2);
    expect(sequence[0].marker).not.toBe(sequence[sequence.length - 1].marker);
    expect(sequence[sequence.length - 1].value).toMatchObject({ dropin_sha256: sha256Hex(theirs) });
  }, 120_000);

  it('another writer who keeps disabling the unit is CONFLICT too: UnitFileState is in the marker', async (ctx) => {
    skipUnless(ctx);
    const n = await hostNode('U-4');
    const handle = await run(n, webResources(n));
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const writer = spawn(
      'sh',
      ['-c', `while true; do /usr/bin/systemctl --user disable -- '${n.name}' 2>/dev/null; sleep 0.1; done`],
      {
        stdio: 'ignore',
      },
    );
    children.push(writer);
    const conflict = await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');
    expect(conflict.conditions.map((c) => [c.type, c.resource_key])).toEqual([['CONFLICTING_WRITER', 'web']]);
    const entry = (await stack.ledger(handle)).find((e) => e.convergence_status === 'CONFLICT')!;
    const sequence = entry.conflicting_writer_evidence!.find((e) => e.resource_key === 'web')!.sequence;
    expect(sequence[sequence.length - 1].value).toMatchObject({ enabled: false });
  }, 120_000);

  it('adopts a running unit in observe mode: drift on exactly the declared property, the plan recorded, nothing run', async (ctx) => {
    skipUnless(ctx);
    const n = await hostNode('U-5', 'observe');
    expect(systemctl('enable', '--now', '--', n.name).status).toBe(0);
    const pid = mainPid(n.name);
    H().resetCalls();
    const handle = await run(n, {
      web: { type: 'unit', name: n.name, enabled: true, active: true, properties: { Restart: 'always', Type: 'exec' } },
    });
    const drifted = await stack.waitFor(handle, (s) => s.convergence_status === 'DRIFTED');
    expect(drifted.reason).toBe('OBSERVE_MODE_DRIFT');
    const entry = (await stack.ledger(handle)).find((e) => e.convergence_status === 'DRIFTED')!;
    expect(web(entry)).toMatchObject({
      desired: { enabled: true, active: true, properties: { Restart: 'always', Type: 'exec' } },
      observed: { enabled: true, active: true, properties: { Restart: 'no', Type: 'exec' } },
      drift: true,
      effective_mode: 'observe',
    });
    expect(entry.planned_actions.map((p) => [p.action, p.authorized])).toEqual([['unit.apply', false]]);
    expect(entry.authorized_actions).toEqual([]);
    await stack.waitForPass(handle, Date.now(), 2);
    expect(changes(H().calls())).toEqual([]);
    expect(mainPid(n.name)).toBe(pid);
  }, 120_000);

  it('a masked unit is a destructive repair: BLOCKED, handed over as work, and the mask stays', async (ctx) => {
    skipUnless(ctx);
    const n = await hostNode('U-6');
    expect(systemctl('mask', '--', n.name).status).toBe(0);
    H().resetCalls();
    const handle = await run(n, webResources(n));
    const blocked = await stack.waitFor(handle, (s) => s.reason === 'DESTRUCTIVE_REPAIR_REQUIRED');
    expect(blocked.convergence_status).toBe('BLOCKED');
    const condition = blocked.conditions.find((c) => c.type === 'DESTRUCTIVE_REPAIR_REQUIRED')!;
    expect(condition.resource_key).toBe('web');
    expect(JSON.stringify(condition)).toContain('is masked');
    const id = workItemId(n.node, 'DESTRUCTIVE_REPAIR_REQUIRED', 'web');
    const item = await until(() => stack.client.workflow.getHandle(id).query(workItemQuery), { what: id, errors: 'retry' });
    expect(item.state).toBe('OPEN');
    expect(changes(H().calls()).filter((argv) => argv.includes(n.name))).toEqual([]);
    expect(show(n.name, ['LoadState']).LoadState).toBe('masked');
  }, 120_000);

  it('a repair whose every systemctl succeeded while the property stays wrong is ineffective, then BLOCKED (seed 000, probe 4)', async (ctx) => {
    skipUnless(ctx);
    const n = await hostNode('U-7');
    // The drop-in does not set Restart=always, so no restart or reload can make it effective.
    const handle = await run(n, webResources(n, { properties: { Restart: 'always' } }), { retry_budget: 2 });
    const blocked = await stack.waitFor(handle, (s) => s.reason === 'RETRY_BUDGET_EXHAUSTED', 90_000);
    expect(blocked.convergence_status).toBe('BLOCKED');
    const ledger = await stack.ledger(handle);
    expect(statusesOf(ledger)).toContain('RETRY/ACTION_INEFFECTIVE');
    const ineffective = ledger.find((e) => e.reason === 'ACTION_INEFFECTIVE')!;
    expect(ineffective.execution_evidence.map((e) => [e.resource_key, e.outcome])).toContainEqual(['web', 'applied']);
    expect(probed(ineffective)).toMatchObject({ properties: { Restart: 'on-failure' }, answers: true, active: true });
    expect(web(ineffective).desired).toMatchObject({ properties: { Restart: 'always' } });
  }, 150_000);
});
