// A desired-state author (or whoever can put a task on the node's queue) tries to reach a unit the
// node does not declare or the host does not allow, against a real systemd manager: names that
// systemctl would read as options, mangle into other units or expand as globs, a template, a
// template instance and a unit agent.yaml does not list, Datum's own units, an alias of a unit the
// host does not allow, and probes the host did not list. Desired-state validation refuses each
// name (test/unit/unit-spec.test.ts); here each is forged straight to the agent, which refuses it
// with nothing run: the journal of systemctl calls (test/agent/unit-host.ts) shows no change at all,
// and for a name that is not one, not even a read.

import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/domain';
import { targetMarker } from '../../src/agent/activities';
import { parseAgentConfigText } from '../../src/schemas/documents';
import { action, cleanupNodes, expectRefusal, makeNode, type TestNode } from '../agent/helpers';
import { changes, daemonUnit, freePort, show, startUnitHost, systemctl, writeDaemon, type UnitHost } from '../agent/unit-host';
import { INSTALL_TIMEOUT_MS } from '../helpers/tools';

let host: UnitHost | { skip: string } = { skip: 'not started yet' };
beforeAll(async () => {
  host = await startUnitHost();
}, INSTALL_TIMEOUT_MS);
afterAll(async () => {
  if ('stop' in host) await host.stop();
}, 60_000);
afterEach(cleanupNodes);

const H = () => host as UnitHost;
const skipUnless = (ctx: { skip: (cond: boolean, why: string) => void }) =>
  ctx.skip('skip' in host, `no private systemd manager: ${'skip' in host ? host.skip : ''}`);

const DROPIN = '[Service]\nExecStartPre=/bin/touch /tmp/datum-pwned\n';

async function node(): Promise<TestNode> {
  const t = await makeNode();
  const doc = {
    node: t.node,
    root: t.root,
    reconciliation: { mode: 'enforce', resources: {} },
    overrides: {},
    units: { manager: 'user', directory: H().local },
    allow: { units: ['demo-*.service'], probes: ['http://127.0.0.1:*/health'] },
  };
  await fs.writeFile(t.configPath, JSON.stringify(doc, null, 2));
  return t;
}

const configOf = async (t: TestNode) => parseAgentConfigText(await fs.readFile(t.configPath, 'utf8'), t.configPath);

/** unit.apply as a forged task would carry it: a drop-in that would run a command, enable and start. */
const forged = (t: TestNode, name: string, over: Record<string, unknown> = {}) =>
  action(
    t.node,
    'x',
    'unit.apply',
    {
      name,
      file: { kind: 'dropin', content: DROPIN, sha256: sha256Hex(DROPIN) },
      enable: true,
      start: true,
      restart_on: [],
      probe: null,
      expect: { dropin_sha256: sha256Hex(DROPIN), enabled: true, active: true },
      ...over,
    },
    { observed_marker: null },
  );

describe('a unit outside what the node declares or the host allows, forged to the agent', () => {
  it.for<[string, string, string]>([
    ['../x.service', 'InvalidAction', 'starts with ".", which would read as an option or a hidden file; nothing was run'],
    ['a/../../x.service', 'InvalidAction', 'holds "/", which systemd would escape or mangle'],
    ['--root=/tmp x.service', 'InvalidAction', 'starts with "-", which would read as an option'],
    ['-x.service', 'InvalidAction', 'starts with "-"'],
    ['demo-*.service', 'InvalidAction', 'holds "*"'],
    ['demo-x', 'InvalidAction', 'does not end in a unit type'],
    ['/tmp/foo', 'InvalidAction', 'does not end in a unit type'],
    ['demo-t@.service', 'InvalidAction', 'is a template, which runs nothing itself'],
    ['datum-agent@N-24.service', 'InvalidAction', 'starts with "datum-", which names the agent\'s own unit'],
    ['demo-t@x.service', 'NotAllowedByHost', 'a template instance needs a pattern with an @'],
    ['other.service', 'NotAllowedByHost', 'unit "other.service" is not in this host\'s allow.units (demo-*.service)'],
  ])('refuses %j (%s) and runs nothing', { timeout: 60_000 }, async ([name, type, words], ctx) => {
    skipUnless(ctx);
    const t = await node();
    H().resetCalls();
    const failure = await expectRefusal(t.apply(forged(t, name)), type);
    expect(failure.message).toContain(words);
    expect(failure.message).toMatch(/ — fix: /);
    // Not even a read: the name never reached systemctl.
    expect(H().calls()).toEqual([]);
    expect(existsSync('/tmp/datum-pwned')).toBe(false);
    expect(await fs.readdir(H().local)).toEqual([]);
  });

  it('observes a forged name without asking systemctl, and says why', async (ctx) => {
    skipUnless(ctx);
    const t = await node();
    H().resetCalls();
    const seen = await t.observe({
      a: { type: 'unit', name: '--root=/tmp x.service', active: true },
      b: { type: 'unit', name: '*.service', active: true },
    });
    expect(seen.resources.a).toMatchObject({ value: null, marker: null, detail: { refusal: 'InvalidAction' } });
    expect(seen.resources.a.detail.problem).toMatch(/^unit name "--root=\/tmp x\.service" starts with "-"/);
    expect(seen.resources.b.detail.problem).toMatch(/holds "\*"/);
    expect(H().calls()).toEqual([]);
  });

  it('refuses an allowed name that is an alias of a unit the host does not allow, with reads only', async (ctx) => {
    skipUnless(ctx);
    const t = await node();
    const real = `secret-${process.pid}.service`;
    const alias = `demo-alias-${process.pid}.service`;
    await fs.writeFile(path.join(H().vendor, real), '[Service]\nType=exec\nExecStart=/bin/sleep 1000\n');
    await fs.symlink(path.join(H().vendor, real), path.join(H().local, alias));
    try {
      expect(systemctl('daemon-reload').status).toBe(0);
      expect(systemctl('start', '--', real).status).toBe(0);
      expect(show(alias, ['Id']).Id).toBe(real);
      // Planned against the marker the agent reads now, so compare-and-swap lets it through to the provider.
      const plan = forged(t, alias);
      const marker = await targetMarker({ node: t.node, root: t.root, config: await configOf(t) }, plan);
      H().resetCalls();
      const failure = await expectRefusal(t.apply({ ...plan, observed_marker: marker }), 'InvalidAction');
      expect(failure.message).toContain(`"${alias}" is another name of ${real} (systemctl show Id)`);
      // Reads only (compare-and-swap's, then the provider's own), each with the name after "--".
      expect(H().calls().length).toBeGreaterThan(0);
      expect(changes(H().calls())).toEqual([]);
      for (const argv of H().calls()) expect(argv.slice(-2)).toEqual(['--', alias]);
      expect(await fs.readdir(H().local)).toEqual([alias]);
    } finally {
      systemctl('stop', '--', real);
      await fs.rm(path.join(H().local, alias), { force: true });
      await fs.rm(path.join(H().vendor, real), { force: true });
      systemctl('daemon-reload');
    }
  });

  it('runs no probe the host did not list: not at observe, and an apply that needs it is refused', async (ctx) => {
    skipUnless(ctx);
    const t = await node();
    const name = `demo-probe-${process.pid}.service`;
    const port = await freePort();
    await fs.writeFile(path.join(H().vendor, name), daemonUnit(await writeDaemon(t.base), port, '/nonexistent'));
    const marker = path.join(t.outside, 'probed');
    const probe = { command: ['/bin/touch', marker] };
    try {
      H().resetCalls();
      const seen = await t.observe({ p: { type: 'unit', name, dropin: '[Service]\n', active: true, probe } });
      expect(seen.resources.p.value).toMatchObject({ answers: null });
      expect(seen.resources.p.detail.probe).toBe(`not run: ["/bin/touch","${marker}"] is not in this host's allow.probes`);
      expect(existsSync(marker)).toBe(false);
      const failure = await expectRefusal(t.apply(forged(t, name, { probe })), 'NotAllowedByHost');
      expect(failure.message).toContain(
        `the probe of unit "${name}" (["/bin/touch","${marker}"]) is not in this host's allow.probes`,
      );
      expect(changes(H().calls())).toEqual([]);
      expect(existsSync(marker)).toBe(false);

      // A probe that reaches off the host is refused as malformed before anything is judged.
      const off = { http: { url: 'http://169.254.169.254/latest/meta-data' } };
      await expectRefusal(t.apply(forged(t, name, { probe: off })), 'InvalidAction');
    } finally {
      await fs.rm(path.join(H().vendor, name), { force: true });
    }
  });
});
