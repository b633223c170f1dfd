// The `unit` provider against a real systemd manager (a private systemd --user, test/agent/
// unit-host.ts), through the agent's real activities: a unit converged with a drop-in Datum owns
// (written, reloaded, enabled, started, and proven current by when its main process started), a
// hand edit of the drop-in, a restart_on file changed after the start, an adopted unit in observe
// mode, an override, forged destructive actions, a probe that answers while the content is stale,
// a whole unit file, a unit another file shadows, a masked unit and a start the manager refuses.
// Every systemctl the agent runs is journalled, so each test says exactly what ran.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  desiredValue,
  sha256Hex,
  type Assessment,
  type AuthorizedAction,
  type BoundIntent,
  type ObservedResource,
  type ResourceSpec,
  type UnitSpec,
} from '../../src/domain';
import { RESOURCE_KINDS } from '../../src/domain/resources';
import { unitProvider } from '../../src/agent/providers/unit';
import { parseAgentConfigText } from '../../src/schemas/documents';
import { action, cleanupNodes, expectRefusal, fileAction, makeNode, runActivity, type TestNode } from './helpers';
import type { WatchRequest } from '../../src/contract';
import { watchNode } from '../../src/agent/watch';
import { cgroupsOf } from './systemd-manager';
import {
  changes,
  daemonUnit,
  environOf,
  freePort,
  show,
  startUnitHost,
  systemctl,
  writeDaemon,
  type UnitHost,
} from './unit-host';
import { INSTALL_TIMEOUT_MS } from '../helpers/tools';

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

const started: string[] = [];
afterEach(async () => {
  if ('stop' in host) {
    for (const name of started.splice(0)) {
      systemctl('stop', '--', name);
      systemctl('unmask', '--', name);
      systemctl('disable', '--', name);
      for (const dir of [host.local, host.vendor, path.join(host.manager.dirs!.config, 'systemd/user.control')]) {
        await fs.rm(path.join(dir, name), { force: true, recursive: true });
        await fs.rm(path.join(dir, `${name}.d`), { force: true, recursive: true });
      }
    }
    systemctl('daemon-reload');
  }
  await cleanupNodes();
});

let n = 0;
/** A fresh unit name (the manager is shared by every test of the file). */
const unitName = (what: string) => {
  const name = `demo-${what}-${process.pid}-${++n}.service`;
  started.push(name);
  return name;
};

const ROOT = path.resolve(__dirname, '../..');
const CONFIG = 'etc/app/app.conf';
const DROPIN = '[Service]\nEnvironment=GREETING=hello\nRestart=on-failure\n';

/** agent.yaml of the node: the user manager, Datum's units in its config home, demo-* units and their health probes allowed. */
async function configure(t: TestNode, extra: Record<string, unknown> = {}): Promise<void> {
  const doc = {
    node: t.node,
    root: t.root,
    reconciliation: { mode: 'enforce', resources: {} },
    overrides: {},
    units: { manager: 'user', directory: H().local },
    allow: { units: ['demo-*.service'], probes: ['http://127.0.0.1:*/health'] },
    ...extra,
  };
  await fs.writeFile(t.configPath, JSON.stringify(doc, null, 2));
}

/** A unit action as the domain plans it from `seen` (src/domain/resources/unit.ts plan). */
function planned(t: TestNode, key: string, resources: Record<string, ResourceSpec>, seen: ObservedResource): AuthorizedAction {
  const spec = resources[key] as UnitSpec;
  const a = { resource_key: key, desired: desiredValue(key, resources), observed: seen } as Assessment;
  const plan = RESOURCE_KINDS.unit.plan(a, spec, { resources } as BoundIntent);
  return action(t.node, key, plan.action, plan.spec, { observed_marker: seen.marker });
}

interface Web {
  t: TestNode;
  name: string;
  port: number;
  resources: Record<string, ResourceSpec>;
}

/** A node with the daemon installed as a "vendor" unit, and desired state that adds Datum's drop-in and config to it. */
async function webNode(over: Partial<UnitSpec> = {}): Promise<Web> {
  const t = await makeNode();
  await configure(t);
  const name = unitName('web');
  const port = await freePort();
  const daemon = await writeDaemon(t.base);
  await fs.writeFile(path.join(H().vendor, name), daemonUnit(daemon, port, path.join(t.root, CONFIG)));
  const resources: Record<string, ResourceSpec> = {
    config: { type: 'file', path: CONFIG, content: 'v1\n' },
    web: {
      type: 'unit',
      name,
      dropin: DROPIN,
      enabled: true,
      active: true,
      properties: { Restart: 'on-failure' },
      restart_on: ['config'],
      probe: { http: { url: `http://127.0.0.1:${port}/health`, body: '"greeting":"hello"' } },
      ...over,
    },
  };
  await t.apply(fileAction(t.node, 'config', CONFIG, 'v1\n'));
  return { t, name, port, resources };
}

/** Observes the node and applies the plan for "web" made from it, as one pass would. */
async function converge(w: Web) {
  const seen = (await w.t.observe(w.resources)).resources.web;
  const act = planned(w.t, 'web', w.resources, seen);
  const evidence = await w.t.apply(act);
  const after = (await w.t.observe(w.resources)).resources.web;
  return { seen, act, evidence, after };
}

const health = async (port: number) => (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as Record<string, unknown>;
const mainPid = (name: string) => Number(show(name, ['MainPID']).MainPID);
const dropinOf = (name: string) => `${name}.d/50-datum.conf`;

describe('the unit provider against a real systemd manager', () => {
  it('leaves the machine where it was: the private manager and its units run in a cgroup of their own', (ctx) => {
    skipUnless(ctx);
    expect(cgroupsOf(1)).toBe(H().cgroupsBefore.init);
    expect(cgroupsOf('self')).toBe(H().cgroupsBefore.self);
    expect(show('default.target', ['Id']).Id).toBe('default.target');
  });

  it('converges a unit with a drop-in: written, reloaded, enabled, started, and current by when its main process started', async (ctx) => {
    skipUnless(ctx);
    const w = await webNode();
    H().resetCalls();
    const { seen, act, evidence, after } = await converge(w);
    const piece = dropinOf(w.name);
    expect(seen.value).toEqual({
      dropin_sha256: null,
      enabled: false,
      active: false,
      properties: { Restart: 'no' },
      started_after: { [piece]: null, config: null },
      answers: false,
    });
    expect(seen.obstruction).toBeNull();
    expect(evidence.outcome).toBe('applied');
    expect(evidence.detail).toMatch(
      new RegExp(
        `^wrote ${H().local}/${piece.replace(/\./g, '\\.')} \\(sha256 [0-9a-f]{12}…\\), then reloaded the manager, then enabled ${w.name}, then started ${w.name}\\. `,
      ),
    );
    // The manager's account, the kernel's and the daemon's own agree: the process runs with the drop-in's environment.
    const pid = mainPid(w.name);
    expect(environOf(pid).GREETING).toBe('hello');
    expect(await health(w.port)).toEqual({ greeting: 'hello', config: 'v1\n' });
    expect(after.value).toEqual(desiredValue('web', w.resources));
    expect(after.value).toMatchObject({
      started_after: { [piece]: sha256Hex(DROPIN), config: sha256Hex('v1\n') },
      answers: true,
    });
    expect(after.marker).toBe(evidence.marker_after);
    expect(after.detail.evidence).toMatch(
      new RegExp(
        `^main process ${pid} started \\d{4}-\\d\\d-\\d\\d \\S+ UTC, after ${piece.replace(/\./g, '\\.')} \\(in place .* UTC\\) and config \\(in place .* UTC\\)`,
      ),
    );
    expect(await fs.readFile(path.join(H().local, piece), 'utf8')).toBe(DROPIN);
    // Exactly these changes, each with the unit's name after "--".
    expect(changes(H().calls())).toEqual([
      ['--user', 'daemon-reload', '--no-ask-password'],
      ['--user', 'enable', '--no-ask-password', '--', w.name],
      ['--user', 'start', '--no-ask-password', '--no-block', '--', w.name],
    ]);

    // A replay is answered from the journal: nothing runs again.
    H().resetCalls();
    expect(await w.t.apply(act)).toEqual({ ...evidence, outcome: 'replayed' });
    expect(changes(H().calls())).toEqual([]);
    expect(mainPid(w.name)).toBe(pid);
  }, 60_000);

  it('sees a hand edit of its drop-in (value, marker, pending reload), keeps the edit as a backup and repairs it', async (ctx) => {
    skipUnless(ctx);
    const w = await webNode();
    const first = await converge(w);
    const pid = mainPid(w.name);
    const piece = dropinOf(w.name);
    const evil = '[Service]\nEnvironment=GREETING=evil\nRestart=on-failure\n';
    await fs.writeFile(path.join(H().local, piece), evil);

    const seen = (await w.t.observe(w.resources)).resources.web;
    expect(seen.value).toMatchObject({
      dropin_sha256: sha256Hex(evil),
      started_after: { [piece]: null, config: sha256Hex('v1\n') },
    });
    // The running process still answers as before: liveness, which never stands for the content.
    expect(seen.value).toMatchObject({ answers: true, active: true });
    expect(seen.value).not.toEqual(desiredValue('web', w.resources));
    expect(seen.marker).not.toBe(first.after.marker);
    expect(seen.detail).toMatchObject({ need_daemon_reload: 'yes' });
    expect(seen.detail.not_taken).toEqual([`${piece} changed since the manager loaded the unit (NeedDaemonReload=yes)`]);

    // A plan made before the edit meets it at the write: MARKER_MOVED, and the edit stays.
    const stale = planned(w.t, 'web', w.resources, first.after);
    await expectRefusal(w.t.apply({ ...stale, action_seq: stale.action_seq + 100 }), 'MarkerMoved');
    expect(await fs.readFile(path.join(H().local, piece), 'utf8')).toBe(evil);

    const repair = await w.t.apply(planned(w.t, 'web', w.resources, seen));
    const backup = /replacing \d+ bytes kept at \.datum\/backup\/([^,]+),/.exec(repair.detail)?.[1];
    expect(repair.detail).toMatch(
      /, then reloaded the manager, then restarted .* \(its process started before its content was in place\)/,
    );
    expect(await fs.readFile(path.join(w.t.root, '.datum/backup', backup!), 'utf8')).toBe(evil);
    const after = (await w.t.observe(w.resources)).resources.web;
    expect(after.value).toEqual(desiredValue('web', w.resources));
    expect(mainPid(w.name)).not.toBe(pid);
    expect(environOf(mainPid(w.name)).GREETING).toBe('hello');
  }, 60_000);

  it('a restart_on file written after the start makes the unit stale under the same marker, until a restart', async (ctx) => {
    skipUnless(ctx);
    const w = await webNode();
    const first = await converge(w);
    const pid = mainPid(w.name);
    const resources = { ...w.resources, config: { type: 'file' as const, path: CONFIG, content: 'v2\n' } };
    await w.t.apply(fileAction(w.t.node, 'config', CONFIG, 'v2\n'));

    const seen = (await w.t.observe(resources)).resources.web;
    // Not another writer: the marker is the one Datum's apply left. The process just has old content.
    expect(seen.marker).toBe(first.after.marker);
    expect(seen.value).toMatchObject({ started_after: { [dropinOf(w.name)]: sha256Hex(DROPIN), config: null }, answers: true });
    expect(desiredValue('web', resources)).toMatchObject({ started_after: { config: sha256Hex('v2\n') } });
    expect(seen.detail.not_taken).toEqual([
      expect.stringMatching(/^config was put in place .* UTC, after the process started .* UTC$/),
    ]);
    expect(await health(w.port)).toMatchObject({ config: 'v1\n' });

    H().resetCalls();
    const ev = await w.t.apply(planned(w.t, 'web', { ...w.resources, ...resources }, seen));
    expect(ev.detail).toMatch(
      new RegExp(`^restarted ${w.name.replace(/\./g, '\\.')} \\(its process started before its content was in place\\)\\. `),
    );
    expect(changes(H().calls())).toEqual([['--user', 'restart', '--no-ask-password', '--no-block', '--', w.name]]);
    expect((await w.t.observe(resources)).resources.web.value).toEqual(desiredValue('web', resources));
    expect(mainPid(w.name)).not.toBe(pid);
    expect(await health(w.port)).toEqual({ greeting: 'hello', config: 'v2\n' });
  }, 60_000);

  it("sees a unit disabled behind its back at once (is-enabled, not the manager's cached UnitFileState), under a moved marker", async (ctx) => {
    skipUnless(ctx);
    const w = await webNode();
    const first = await converge(w);
    expect(systemctl('disable', '--', w.name).status).toBe(0);
    // The manager's own property still says enabled until a daemon-reload (systemd 252).
    expect(show(w.name, ['UnitFileState']).UnitFileState).toBe('enabled');
    const seen = (await w.t.observe(w.resources)).resources.web;
    expect(seen.value).toMatchObject({ enabled: false, active: true });
    expect(seen.detail).toMatchObject({ unit_file_state: 'disabled' });
    expect(seen.marker).not.toBe(first.after.marker);
  }, 60_000);

  it('reads many units at once (one show, one list-unit-files), each enabled, disabled, static, masked, missing or instance state as is-enabled says it', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await configure(t, { reconciliation: { mode: 'observe', resources: {} } });
    const body = '[Service]\nType=exec\nExecStart=/bin/sleep 1000\n';
    const install = '[Install]\nWantedBy=default.target\n';
    const [on, off, fixed, masked, missing] = ['on', 'off', 'static', 'masked', 'missing'].map(unitName);
    const template = `demo-tmpl-${process.pid}-${++n}@.service`;
    const instance = template.replace('@', '@a');
    started.push(template, instance);
    for (const name of [on, off, masked, template]) await fs.writeFile(path.join(H().vendor, name), body + install);
    await fs.writeFile(path.join(H().vendor, fixed), body);
    expect(systemctl('daemon-reload').status).toBe(0);
    for (const args of [
      ['enable', on],
      ['mask', masked],
      ['enable', instance],
    ])
      expect(systemctl(args[0], '--', args[1]).status).toBe(0);
    const names = [on, off, fixed, masked, missing, instance];
    const resources = Object.fromEntries(
      names.map((name, i): [string, ResourceSpec] => [`u${i}`, { type: 'unit', name, enabled: true }]),
    );

    H().resetCalls();
    const seen = (await t.observe(resources)).resources;
    const states = names.map((_, i) => seen[`u${i}`].detail?.unit_file_state);
    const oneByOne = names.map((name) => systemctl('is-enabled', '--', name).stdout.split('\n')[0].trim());
    expect(oneByOne).toEqual(['enabled', 'disabled', 'static', 'masked', '', 'enabled']);
    expect(states).toEqual(oneByOne);
    const calls = H().calls();
    expect(calls.filter((argv) => argv.includes('show')).length).toBeLessThan(names.length);
    expect(calls.filter((argv) => argv.includes('list-unit-files')).length).toBeLessThan(names.length - 1);
    // list-unit-files cannot name a template's instance: is-enabled reads it, and only it.
    expect(calls.filter((argv) => argv.includes('is-enabled'))).toEqual([['--user', 'is-enabled', '--', instance]]);
  }, 60_000);

  it('reads a unit another writer is restarting once the restart is done, not as stopped mid-way', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await configure(t);
    const name = unitName('slow');
    const daemon = await writeDaemon(t.base);
    const unit = daemonUnit(daemon, await freePort(), path.join(t.root, CONFIG), 'ExecStartPre=/bin/sleep 2\n');
    await fs.writeFile(path.join(H().vendor, name), unit);
    expect(systemctl('daemon-reload').status).toBe(0);
    expect(systemctl('start', '--', name).status).toBe(0);
    const resources: Record<string, ResourceSpec> = { slow: { type: 'unit', name, active: true } };
    const before = mainPid(name);
    // Another writer's restart, queued: the manager stops the unit, then runs its two-second ExecStartPre.
    expect(systemctl('restart', '--no-block', '--', name).status).toBe(0);
    const seen = (await t.observe(resources)).resources.slow;
    expect(seen.value).toEqual({ active: true });
    expect(seen.detail).toMatchObject({ active_state: 'active' });
    expect(mainPid(name)).not.toBe(before);
  }, 60_000);

  it("wakes the watch when the unit stops (a state observe's marker leaves out), and not for an unchanged unit", async (ctx) => {
    skipUnless(ctx);
    const w = await webNode();
    const { after } = await converge(w);
    const observed = await w.t.observe(w.resources);
    const baseline = Object.fromEntries(Object.entries(observed.resources).map(([k, r]) => [k, r.marker]));
    expect(baseline.web).toBe(after.marker);
    const watch = (window_ms: number) =>
      runActivity((r: WatchRequest) => w.t.acts.watch(r), { node: w.t.node, resources: w.resources, window_ms, baseline });
    // The watch reads the running state too, and still agrees with the observation it starts from.
    expect(await watch(500)).toMatchObject({ changed: [], reason: 'window elapsed' });
    const watching = watch(60_000);
    await new Promise((r) => setTimeout(r, 300));
    const stoppedAt = Date.now();
    expect(systemctl('stop', '--', w.name).status).toBe(0);
    expect(await watching).toMatchObject({ changed: ['web'], reason: 'changed' });
    expect(Date.now() - stoppedAt).toBeLessThan(10_000);
    // Observe's marker did not move: a stopped unit is a failure a start repairs, not another writer.
    expect((await w.t.observe(w.resources)).resources.web.marker).toBe(after.marker);
  }, 60_000);

  // No poll runs in these watches (an hour each): only the manager's record of the unit and the
  // directories of its files can end them, so a fleet's units cost no systemctl while nothing changes.
  it.for<[string, (w: Web) => unknown]>([
    ['stopped', (w) => expect(systemctl('stop', '--', w.name).status).toBe(0)],
    ['restarted', (w) => expect(systemctl('restart', '--', w.name).status).toBe(0)],
    ['killed', (w) => process.kill(Number(show(w.name, ['MainPID']).MainPID), 'SIGKILL')],
    ['disabled', (w) => expect(systemctl('disable', '--', w.name).status).toBe(0)],
    [
      'overridden by a drop-in and reloaded',
      async (w) => {
        await fs.writeFile(path.join(H().local, `${w.name}.d`, 'zz-by-hand.conf'), '[Service]\nRestart=always\n');
        expect(systemctl('daemon-reload').status).toBe(0);
      },
    ],
  ])('wakes the watch, with no poll, when the unit is %s by hand', { timeout: 60_000 }, async ([, change], ctx) => {
    skipUnless(ctx);
    const w = await webNode();
    await converge(w);
    const observed = await w.t.observe(w.resources);
    const baseline = Object.fromEntries(Object.entries(observed.resources).map(([k, r]) => [k, r.marker]));
    let waiting!: () => void;
    const isWaiting = new Promise<void>((resolve) => (waiting = resolve));
    const noPolls = { pollMs: 3_600_000, safetyPollMs: 3_600_000, waiting };
    const request = { node: w.t.node, resources: w.resources, window_ms: 3_600_000, baseline };
    const watching = runActivity((r: WatchRequest) => watchNode(w.t.configPath, r, noPolls), request);
    await isWaiting;
    // Another unit of the same manager starting and stopping is not this one's change.
    const other = await webNode();
    expect(systemctl('start', '--', other.name).status).toBe(0);
    expect(systemctl('stop', '--', other.name).status).toBe(0);
    await change(w);
    expect(await watching).toMatchObject({ changed: ['web'], reason: 'changed' });
  });

  it('an agent killed between writing the drop-in and restarting leaves its own write, which the retry does not take for another writer', async (ctx) => {
    skipUnless(ctx);
    const w = await webNode();
    const seen = (await w.t.observe(w.resources)).resources.web;
    const act = planned(w.t, 'web', w.resources, seen);
    const agent = path.join(ROOT, 'dist/src/agent/activities/index.js');
    const script = `require(${JSON.stringify(agent)}).applyAction(process.argv[1], JSON.parse(process.argv[2])).then(() => process.exit(0), (e) => { console.error(e); process.exit(3); });`;
    const child = spawn(process.execPath, ['-e', script, w.t.configPath, JSON.stringify({ node: w.t.node, action: act })], {
      env: { ...process.env, DATUM_TEST_CRASH_AT: 'unit.written' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const [, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    expect(signal).toBe('SIGKILL');
    expect(await fs.readFile(path.join(H().local, dropinOf(w.name)), 'utf8')).toBe(DROPIN);
    expect(show(w.name, ['ActiveState']).ActiveState).toBe('inactive');

    // The retry finds Datum's own bytes in place: the plan is out of date (re-plan), not another writer's change.
    const failure = await expectRefusal(w.t.apply(act), 'StaleSnapshotRefusal');
    expect(failure.message).toContain("by Datum's own write for generation 12");
    const again = (await w.t.observe(w.resources)).resources.web;
    const rest = await w.t.apply(planned(w.t, 'web', w.resources, again));
    expect(rest.detail).toMatch(new RegExp(`^enabled ${w.name.replace(/\./g, '\\.')}, then started `));
    expect((await w.t.observe(w.resources)).resources.web.value).toEqual(desiredValue('web', w.resources));
  }, 60_000);

  it('adopts an existing unit in observe mode: drift on exactly the declared properties, and nothing changes', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await configure(t, { reconciliation: { mode: 'observe', resources: {} } });
    const name = unitName('adopt');
    const port = await freePort();
    await fs.writeFile(path.join(H().vendor, name), daemonUnit(await writeDaemon(t.base), port, '/nonexistent'));
    expect(systemctl('enable', '--now', '--', name).status).toBe(0);
    const pid = mainPid(name);

    // datum import's spec: what is there now, which observes at desired.
    const imported = await unitProvider.importSpec!({ node: t.node, root: t.root, config: parseConfig(t) }, 'daemon', name);
    expect(imported).toEqual({ spec: { type: 'unit', name, enabled: true, active: true } });
    const asIs = { daemon: (imported as { spec: UnitSpec }).spec };
    expect((await t.observe(asIs)).resources.daemon.value).toEqual(desiredValue('daemon', asIs));

    const resources: Record<string, ResourceSpec> = {
      daemon: { type: 'unit', name, enabled: true, active: true, properties: { Restart: 'always', Type: 'exec' } },
    };
    H().resetCalls();
    const seen = (await t.observe(resources)).resources.daemon;
    expect(seen.value).toEqual({ enabled: true, active: true, properties: { Restart: 'no', Type: 'exec' } });
    expect(desiredValue('daemon', resources)).toEqual({
      enabled: true,
      active: true,
      properties: { Restart: 'always', Type: 'exec' },
    });
    await expectRefusal(t.apply(planned(t, 'daemon', resources, seen)), 'ObserveModeRefusal');
    expect(changes(H().calls())).toEqual([]);
    expect(mainPid(name)).toBe(pid);
  }, 60_000);

  it('never touches a unit an override protects, named by its target', async (ctx) => {
    skipUnless(ctx);
    const w = await webNode();
    const seen = (await w.t.observe(w.resources)).resources.web;
    await configure(w.t, {
      overrides: { [`unit:${w.name}`]: { approved_by: 'oncall', reason: 'CHG-42 vendor config', since: '2026-11-28T10:00:00Z' } },
    });
    H().resetCalls();
    const failure = await expectRefusal(w.t.apply(planned(w.t, 'web', w.resources, seen)), 'OperatorOwnedRefusal');
    expect(failure.message).toContain(`unit:${w.name}`);
    expect(H().calls()).toEqual([]);
    await expect(fs.lstat(path.join(H().local, `${w.name}.d`))).rejects.toThrow(/ENOENT/);
  }, 60_000);

  it.for<string>(['unit.delete', 'unit.disable', 'unit.stop'])(
    'refuses a forged %s as destructive, running nothing',
    { timeout: 60_000 },
    async (kind, ctx) => {
      skipUnless(ctx);
      const w = await webNode();
      await converge(w);
      const pid = mainPid(w.name);
      H().resetCalls();
      const failure = await expectRefusal(
        w.t.apply(action(w.t.node, 'web', kind, { name: w.name }, { observed_marker: null })),
        'DestructiveActionRefusal',
      );
      expect(failure.message).toContain(`${kind} is destructive and the agent never carries out destructive actions`);
      expect(H().calls()).toEqual([]);
      expect(show(w.name, ['ActiveState', 'UnitFileState'])).toEqual({ ActiveState: 'active', UnitFileState: 'enabled' });
      expect(mainPid(w.name)).toBe(pid);
    },
  );

  it('owns a whole unit file: written, loaded as the fragment, started, current', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await configure(t);
    const name = unitName('whole');
    const content = '[Service]\nType=exec\nExecStart=/bin/sleep 1000\n';
    const resources: Record<string, ResourceSpec> = { sleeper: { type: 'unit', name, content, active: true } };
    const seen = (await t.observe(resources)).resources.sleeper;
    expect(seen.value).toEqual({ content_sha256: null, active: false, started_after: { [name]: null } });
    const ev = await t.apply(planned(t, 'sleeper', resources, seen));
    expect(ev.detail).toMatch(/^wrote .*, then reloaded the manager, then started /);
    const after = (await t.observe(resources)).resources.sleeper;
    expect(after.value).toEqual({
      content_sha256: sha256Hex(content),
      active: true,
      started_after: { [name]: sha256Hex(content) },
    });
    expect(after.detail).toMatchObject({ fragment_path: path.join(H().local, name), load_state: 'loaded' });
  }, 60_000);

  it('calls a unit file the manager ranks above Datum’s an obstruction: only removing it would help', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await configure(t);
    const name = unitName('shadow');
    const control = path.join(H().manager.dirs!.config, 'systemd/user.control');
    await fs.mkdir(control, { recursive: true });
    await fs.writeFile(path.join(control, name), '[Service]\nExecStart=/bin/sleep 1000\n');
    expect(systemctl('daemon-reload').status).toBe(0); // as an operator would, so the manager sees the new directory
    const resources: Record<string, ResourceSpec> = {
      s: { type: 'unit', name, content: '[Service]\nExecStart=/bin/sleep 2000\n', active: true },
    };
    const seen = (await t.observe(resources)).resources.s;
    expect(seen.obstruction).toMatch(
      new RegExp(
        `^${name.replace(/\./g, '\\.')} is defined by ${control}/${name.replace(/\./g, '\\.')}, which the manager ranks above ${H().local}: .* — fix: `,
      ),
    );
  }, 60_000);

  it('calls a masked unit an obstruction, and refuses a forged apply of it without writing', async (ctx) => {
    skipUnless(ctx);
    const w = await webNode();
    expect(systemctl('mask', '--', w.name).status).toBe(0);
    const seen = (await w.t.observe(w.resources)).resources.web;
    expect(seen.obstruction).toMatch(
      /is masked .*undoes an operator's decision that it must not run — fix: an operator unmasks it/,
    );
    H().resetCalls();
    await expectRefusal(w.t.apply(planned(w.t, 'web', w.resources, seen)), 'DestructiveActionRefusal');
    expect(changes(H().calls())).toEqual([]);
    await expect(fs.lstat(path.join(H().local, `${w.name}.d`))).rejects.toThrow(/ENOENT/);
  }, 60_000);

  it('fails a start the manager refuses (UnitChangeFailed, in systemctl’s words), recorded as failed, not refused', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await configure(t);
    const name = unitName('ghost');
    const resources: Record<string, ResourceSpec> = { g: { type: 'unit', name, dropin: DROPIN, active: true } };
    const seen = (await t.observe(resources)).resources.g;
    expect(seen.detail).toMatchObject({ load_state: 'not-found' });
    const failure = await expectRefusal(t.apply(planned(t, 'g', resources, seen)), 'UnitChangeFailed');
    expect(failure.message).toMatch(
      new RegExp(
        `^unit\\.apply of "g" on node N-24 failed: systemctl --user start ${name.replace(/\./g, '\\.')} failed: .*not found.* — fix: see systemctl --user status`,
      ),
    );
  }, 60_000);
});

function parseConfig(t: TestNode) {
  return parseAgentConfigText(readFileSync(t.configPath, 'utf8'), t.configPath);
}
