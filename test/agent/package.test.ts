// The package provider through the agent's real activities, on the real dpkg of this host working
// on a confined database beside the node root (agent.yaml's packages.root): what observe reads
// from dpkg's database, installs from a verified .deb or from apt, and every refusal that must
// come before dpkg runs (or before anything is fetched). The host's own packages are never
// touched: the file checks /var/lib/dpkg/status and /var/log/dpkg.log at the end.

import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { desiredValue, type AuthorizedAction, type Json, type PackageSpec } from '../../src/domain';
import { MockActivityEnvironment } from '@temporalio/testing';
import { packageProvider } from '../../src/agent/providers/package';
import { runTool, type ToolRun } from '../../src/agent/dpkg/run';
import { dpkgHolders, untilDpkgIdle } from '../../src/agent/dpkg/busy';
import { agentConfig, resourceSpec } from '../../src/schemas';
import type { BuildDebOptions } from '../../scripts/build-deb.mjs' with { 'resolution-mode': 'import' };
import { confinedApt, dpkgIn, dpkgUnavailable, emptyDpkgRoot, hostDpkgUntouched, queryIn, selectIn } from '../helpers/dpkg';
import { action, cleanupNodes, expectRefusal, makeNode, type TestNode } from './helpers';
import { until } from '../helpers/until';

afterEach(cleanupNodes);

const TEST_NAMES = /dtest-/;
let hostCheck: () => Promise<void>;
beforeAll(async () => {
  hostCheck = await hostDpkgUntouched(TEST_NAMES);
});
afterAll(async () => {
  await hostCheck?.();
});

type Allow = (string | { name: string; from: ('artifact' | 'apt')[] })[];

interface PackageNode extends TestNode {
  /** dpkg's root for this node (packages.root), beside the node root. */
  dpkg: string;
  /** Builds a .deb under the test's base (never inside either root). */
  deb(options: Omit<BuildDebOptions, 'outDir'>): Promise<{ artifact: string; sha256: string }>;
  writePackageConfig(o?: {
    allow?: Allow;
    mode?: 'observe' | 'enforce';
    overrides?: Record<string, Json>;
    aptConfig?: string;
  }): Promise<void>;
}

async function packageNode(allow: Allow = [{ name: 'dtest-*', from: ['artifact', 'apt'] }]): Promise<PackageNode> {
  const t = (await makeNode()) as PackageNode;
  t.dpkg = await emptyDpkgRoot(path.join(t.base, 'dpkg'));
  t.deb = async (options) => {
    const { buildDeb } = await import('../../scripts/build-deb.mjs');
    const built = await buildDeb({ ...options, outDir: path.join(t.base, 'debs', `${options.name}-${options.version}`) });
    return { artifact: built.file, sha256: built.sha256 };
  };
  t.writePackageConfig = async (o = {}) => {
    const doc = {
      node: t.node,
      root: t.root,
      reconciliation: { mode: o.mode ?? 'enforce', resources: {} },
      overrides: o.overrides ?? {},
      allow: { packages: o.allow ?? allow },
      packages: { root: t.dpkg, ...(o.aptConfig ? { apt_config: o.aptConfig } : {}) },
    };
    // What the agent reads must be what an operator could write.
    agentConfig.parse(doc);
    await fs.writeFile(t.configPath, JSON.stringify(doc, null, 2));
  };
  await t.writePackageConfig();
  return t;
}

const spec = (name: string, version: string, art?: { artifact: string; sha256: string }): PackageSpec => ({
  type: 'package',
  name,
  version,
  ...(art ?? {}),
});

/** package.install as a workflow plans it, with the marker a fresh observe of the target reads now. */
async function install(
  t: PackageNode,
  key: string,
  s: PackageSpec,
  over: Partial<AuthorizedAction> = {},
): Promise<AuthorizedAction> {
  const seen = await t.observe({ [key]: s });
  const { type: _type, ...write } = s;
  return action(t.node, key, 'package.install', write, { observed_marker: seen.resources[key].marker, ...over });
}

/** A tiny http server serving `file` that counts requests: what "nothing was fetched" is checked with. */
async function serving(file: string): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const server = http.createServer((_req, res) => {
    hits++;
    void fs.readFile(file).then((bytes) => res.end(bytes));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/${path.basename(file)}`,
    hits: () => hits,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const dpkgLog = (t: PackageNode) => fs.readFile(path.join(t.dpkg, 'var/log/dpkg.log'), 'utf8').catch(() => '');

describe.skipIf(dpkgUnavailable())('package provider (real dpkg, confined database)', () => {
  describe('observe', () => {
    it('reads null with the marker "absent" for a package dpkg does not know, then {version, status} once installed', async () => {
      const t = await packageNode();
      const hello = spec('dtest-hello', '1.1-1');
      const absent = (await t.observe({ hello })).resources.hello;
      expect(absent).toMatchObject({ type: 'package', value: null, marker: 'absent', obstruction: null });
      expect(absent.detail).toMatchObject({ package: 'dtest-hello', root: t.dpkg, status: 'unknown' });

      const deb = await t.deb({ name: 'dtest-hello', version: '1.0-1' });
      expect(dpkgIn(t.dpkg, ['--install', deb.artifact]).status).toBe(0);
      const installed = (await t.observe({ hello })).resources.hello;
      expect(installed.value).toEqual({ version: '1.0-1', status: 'installed' });
      expect(installed.marker).toMatch(/^dpkg:[0-9a-f]{24}$/);
      expect(installed.detail).toMatchObject({ status: 'installed', selection: 'install', held: false, abbrev: 'ii ' });
      // Drift, in the shape the domain compares: the desired value is {version, status: installed}.
      expect(desiredValue('hello', { hello })).toEqual({ version: '1.1-1', status: 'installed' });
    });

    it('reads a removed package that kept its conffiles (config-files) as null, saying so, with its own marker', async () => {
      const t = await packageNode();
      const deb = await t.deb({
        name: 'dtest-conf',
        version: '1.0-1',
        files: { 'etc/dtest-conf/dtest.conf': { content: 'workers=8\n' } },
        conffiles: ['etc/dtest-conf/dtest.conf'],
      });
      expect(dpkgIn(t.dpkg, ['--install', deb.artifact]).status).toBe(0);
      expect(dpkgIn(t.dpkg, ['--remove', 'dtest-conf']).status).toBe(0);
      expect(queryIn(t.dpkg, 'dtest-conf')).toEqual({ version: '1.0-1', abbrev: 'rc ' });

      const seen = (await t.observe({ conf: spec('dtest-conf', '1.0-1') })).resources.conf;
      expect(seen.value).toBeNull();
      expect(seen.marker).toMatch(/^dpkg:/);
      expect(seen.detail).toMatchObject({ status: 'config-files', selection: 'deinstall', config_version: '1.0-1' });
    });

    it('moves the marker on a reinstall of the same version, on a hold, and on another version; not on another package', async () => {
      const t = await packageNode();
      const hello = spec('dtest-hello', '1.0-1');
      const deb = await t.deb({ name: 'dtest-hello', version: '1.0-1' });
      dpkgIn(t.dpkg, ['--install', deb.artifact]);
      const marker = async () => (await t.observe({ hello })).resources.hello.marker;
      const first = await marker();

      const other = await t.deb({ name: 'dtest-other', version: '3-1' });
      dpkgIn(t.dpkg, ['--install', other.artifact]);
      expect(await marker()).toBe(first);

      // ${db-fsys:Last-Modified} counts seconds: a reinstall in the next second is another write.
      await new Promise((r) => setTimeout(r, 1100));
      dpkgIn(t.dpkg, ['--install', deb.artifact]);
      const reinstalled = await marker();
      expect(reinstalled).not.toBe(first);

      selectIn(t.dpkg, 'dtest-hello', 'hold');
      const held = (await t.observe({ hello })).resources.hello;
      expect(held.marker).not.toBe(reinstalled);
      expect(held.value).toEqual({ version: '1.0-1', status: 'installed' });
      expect(held.detail).toMatchObject({ selection: 'hold', held: true, abbrev: 'hi ' });
    });

    it("gives the watch the same marker as observe, from dpkg's database under packages.root", async () => {
      const t = await packageNode();
      const hello = spec('dtest-hello', '1.0-1');
      const config = agentConfig.parse(JSON.parse(await fs.readFile(t.configPath, 'utf8')));
      const watched = () => packageProvider.watch.marker(t.root, 'hello', hello, config);
      expect(await watched()).toBe('absent');
      dpkgIn(t.dpkg, ['--install', (await t.deb({ name: 'dtest-hello', version: '1.0-1' })).artifact]);
      expect(await watched()).toBe((await t.observe({ hello })).resources.hello.marker);
      expect(packageProvider.watch.dirs(t.root, 'hello', hello, config)).toEqual([
        path.join(t.dpkg, 'var/lib/dpkg'),
        path.join(t.dpkg, 'var/lib/dpkg/updates'),
      ]);
    });
    it('waits for a dpkg at work on the database to finish, and reads the package where that run left it (not mid-run)', async () => {
      const t = await packageNode();
      const slow = await t.deb({ name: 'dtest-slow', version: '1.0-1', scripts: { postinst: '#!/bin/sh\nsleep 2\n' } });
      // Another writer's real dpkg, its postinst run outside the root (which has no /bin/sh): about two seconds under dpkg's locks.
      const other = spawn(
        'dpkg',
        [
          `--root=${t.dpkg}`,
          `--log=${path.join(t.dpkg, 'var/log/dpkg.log')}`,
          '--force-script-chrootless',
          '--install',
          slow.artifact,
        ],
        { stdio: 'ignore' },
      );
      const exited = new Promise<number | null>((resolve) => other.on('exit', resolve));
      await until(() => dpkgHolders(t.dpkg), { what: "dpkg's locks taken", accept: (pids) => pids.includes(other.pid!) });
      const seen = (await t.observe({ slow: spec('dtest-slow', '1.0-1') })).resources.slow;
      expect(await exited).toBe(0);
      expect(seen.value).toEqual({ version: '1.0-1', status: 'installed' });
      expect(seen.detail).not.toHaveProperty('dpkg_busy');
    });

    it('gives up waiting on a lock held past its bound, and then names who holds it', async () => {
      const t = await packageNode();
      await fs.writeFile(path.join(t.dpkg, 'var/lib/dpkg/lock'), '');
      // A process holding dpkg's lock as dpkg does (an fcntl write lock), and never letting go.
      const holder = spawn(
        'python3',
        [
          '-c',
          'import fcntl,sys,time; f=open(sys.argv[1],"w"); fcntl.lockf(f, fcntl.LOCK_EX); print("held", flush=True); time.sleep(600)',
          path.join(t.dpkg, 'var/lib/dpkg/lock'),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      try {
        await new Promise((resolve) => holder.stdout.once('data', resolve));
        expect(await dpkgHolders(t.dpkg)).toEqual([holder.pid]);
        const started = Date.now();
        expect(await untilDpkgIdle(t.dpkg, 300)).toEqual([holder.pid]);
        expect(Date.now() - started).toBeGreaterThanOrEqual(300);
      } finally {
        holder.kill('SIGKILL');
        await new Promise((resolve) => holder.once('exit', resolve));
      }
      expect(await dpkgHolders(t.dpkg)).toEqual([]);
      expect(await untilDpkgIdle(t.dpkg, 300)).toEqual([]);
    });
  });

  describe('install from a .deb artifact', () => {
    it("installs the exact version into packages.root, and the marker it returns is what dpkg's database reports after", async () => {
      const t = await packageNode();
      const deb = await t.deb({ name: 'dtest-hello', version: '1.1-1' });
      const hello = spec('dtest-hello', '1.1-1', deb);
      const ev = await t.apply(await install(t, 'hello', hello));
      expect(ev).toMatchObject({ resource_key: 'hello', action: 'package.install', outcome: 'applied', refusal: null });
      expect(ev.detail).toMatch(
        /ran dpkg --install on .*dtest-hello_1\.1-1_all\.deb \(sha256 [0-9a-f]{12}… verified, its control names dtest-hello 1\.1-1\); dpkg exited 0 \(".*Setting up dtest-hello \(1\.1-1\) \.\.\."\), and dpkg's database now reports dtest-hello 1\.1-1 installed\./,
      );
      const seen = (await t.observe({ hello })).resources.hello;
      expect(seen.value).toEqual(desiredValue('hello', { hello }));
      expect(seen.marker).toBe(ev.marker_after);
      expect(queryIn(t.dpkg, 'dtest-hello')).toEqual({ version: '1.1-1', abbrev: 'ii ' });
      // Its files are in dpkg's root, nothing of it in the node root (only the agent's own .datum/),
      // and dpkg logged into the root it changed.
      expect(await fs.readFile(path.join(t.dpkg, 'usr/share/dtest-hello/version.txt'), 'utf8')).toBe('dtest-hello 1.1-1\n');
      expect(await fs.readdir(t.root)).toEqual(['.datum']);
      expect(await fs.readdir(path.join(t.root, '.datum/tmp'))).toEqual([]);
      expect(await dpkgLog(t)).toMatch(/status installed dtest-hello:all 1\.1-1/);
    });

    it('upgrades and downgrades to the exact version desired state names', async () => {
      const t = await packageNode();
      dpkgIn(t.dpkg, ['--install', (await t.deb({ name: 'dtest-hello', version: '2.0-1' })).artifact]);
      const older = spec('dtest-hello', '1.1-1', await t.deb({ name: 'dtest-hello', version: '1.1-1' }));
      await t.apply(await install(t, 'hello', older));
      expect(queryIn(t.dpkg, 'dtest-hello')).toEqual({ version: '1.1-1', abbrev: 'ii ' });
    });

    it('answers a replay of the same action from its journal, and dpkg runs once', async () => {
      const t = await packageNode();
      const hello = spec('dtest-hello', '1.1-1', await t.deb({ name: 'dtest-hello', version: '1.1-1' }));
      const a = await install(t, 'hello', hello);
      const first = await t.apply(a);
      const logged = await dpkgLog(t);
      const again = await t.apply(a);
      expect(again).toMatchObject({ outcome: 'replayed', marker_after: first.marker_after, detail: first.detail });
      expect(await dpkgLog(t)).toBe(logged);
    });

    it('refuses a .deb whose sha256 does not verify (ArtifactDigestMismatch) before dpkg runs: nothing installed', async () => {
      const t = await packageNode();
      const deb = await t.deb({ name: 'dtest-hello', version: '1.1-1' });
      const wrong = spec('dtest-hello', '1.1-1', { artifact: deb.artifact, sha256: 'ab'.repeat(32) });
      const failure = await expectRefusal(t.apply(await install(t, 'hello', wrong)), 'ArtifactDigestMismatch');
      expect(failure.message).toContain(
        `has sha256 ${deb.sha256}, but desired state expects ${'ab'.repeat(32)}; dpkg was not run`,
      );
      expect(queryIn(t.dpkg, 'dtest-hello')).toBeNull();
      expect(await dpkgLog(t)).toBe('');
      expect(await fs.readdir(path.join(t.root, '.datum/tmp'))).toEqual([]);
    });

    it('refuses a .deb whose own control says another package or version, whatever its file name, before dpkg runs', async () => {
      const t = await packageNode();
      // 2.0-1's bytes under 1.1-1's file name: dpkg would install 2.0-1 and exit 0.
      const renamed = await t.deb({ name: 'dtest-hello', version: '2.0-1', fileName: 'dtest-hello_1.1-1_all.deb' });
      const byVersion = await expectRefusal(
        t.apply(await install(t, 'hello', spec('dtest-hello', '1.1-1', renamed))),
        'ArtifactUnavailable',
      );
      expect(byVersion.message).toMatch(
        /is dtest-hello 2\.0-1 by its own control file, not dtest-hello 1\.1-1 as desired state says; dpkg was not run/,
      );

      const other = await t.deb({ name: 'dtest-other', version: '1.1-1', fileName: 'dtest-hello_1.1-1_all.deb' });
      const byName = await expectRefusal(
        t.apply(await install(t, 'hello', spec('dtest-hello', '1.1-1', other))),
        'ArtifactUnavailable',
      );
      expect(byName.message).toMatch(/is dtest-other 1\.1-1 by its own control file/);
      expect(queryIn(t.dpkg, 'dtest-hello')).toBeNull();
      expect(queryIn(t.dpkg, 'dtest-other')).toBeNull();
      expect(await dpkgLog(t)).toBe('');
    });

    it('refuses a .deb for another architecture before dpkg runs', async () => {
      const t = await packageNode();
      const foreign = await t.deb({ name: 'dtest-hello', version: '1.1-1', architecture: 'mips64el' });
      const failure = await expectRefusal(
        t.apply(await install(t, 'hello', spec('dtest-hello', '1.1-1', foreign))),
        'ArtifactUnavailable',
      );
      expect(failure.message).toMatch(/is built for mips64el, and dpkg under .* installs all, /);
      expect(queryIn(t.dpkg, 'dtest-hello')).toBeNull();
    });

    it('records a dpkg that ran and failed as PackageInstallFailed (tried, not refused), with its last words and what dpkg reports now', async () => {
      const t = await packageNode();
      // A postinst in a root without /bin/sh: dpkg unpacks, cannot run it, and exits 1.
      const broken = await t.deb({ name: 'dtest-post', version: '1.0-1', scripts: { postinst: '#!/bin/sh\nexit 0\n' } });
      const failure = await expectRefusal(
        t.apply(await install(t, 'post', spec('dtest-post', '1.0-1', broken))),
        'PackageInstallFailed',
      );
      expect(failure.message).toMatch(/package\.install of "post" on node N-24 failed: dpkg for dtest-post 1\.0-1 exited 1: .*/);
      expect(failure.message).toMatch(/dpkg's database now reports dtest-post 1\.0-1 half-configured — fix: see dpkg's message/);
      const seen = (await t.observe({ post: spec('dtest-post', '1.0-1') })).resources.post;
      expect(seen.value).toEqual({ version: '1.0-1', status: 'half-configured' });
    });
  });

  describe('refusals before anything runs', () => {
    it('refuses a package the host does not allow by name (NotAllowedByHost), before the .deb is fetched', async () => {
      const t = await packageNode([{ name: 'nginx', from: ['artifact', 'apt'] }]);
      const deb = await t.deb({ name: 'dtest-hello', version: '1.1-1' });
      const server = await serving(deb.artifact);
      try {
        const failure = await expectRefusal(
          t.apply(await install(t, 'hello', spec('dtest-hello', '1.1-1', { artifact: server.url, sha256: deb.sha256 }))),
          'NotAllowedByHost',
        );
        expect(failure.message).toMatch(/package "dtest-hello" is not in this host's allow\.packages \(nginx\)/);
        expect(server.hits()).toBe(0);
        // The same action on a host that allows it does fetch: the count above means something.
        await t.writePackageConfig({ allow: ['dtest-hello'] });
        await t.apply(await install(t, 'hello', spec('dtest-hello', '1.1-1', { artifact: server.url, sha256: deb.sha256 })));
        expect(server.hits()).toBe(1);
      } finally {
        await server.close();
      }
    });

    it('refuses a source the host does not allow the package from: an artifact where only apt is allowed, apt where only artifacts are', async () => {
      const t = await packageNode([{ name: 'dtest-*', from: ['apt'] }]);
      const deb = await t.deb({ name: 'dtest-hello', version: '1.1-1' });
      const server = await serving(deb.artifact);
      try {
        const artifact = await expectRefusal(
          t.apply(await install(t, 'hello', spec('dtest-hello', '1.1-1', { artifact: server.url, sha256: deb.sha256 }))),
          'NotAllowedByHost',
        );
        expect(artifact.message).toMatch(/allowed on this host only from apt, not as a \.deb artifact/);
        expect(server.hits()).toBe(0);
      } finally {
        await server.close();
      }
      await t.writePackageConfig({ allow: [{ name: 'dtest-*', from: ['artifact'] }] });
      const apt = await expectRefusal(t.apply(await install(t, 'hello', spec('dtest-hello', '1.1-1'))), 'NotAllowedByHost');
      expect(apt.message).toMatch(/allowed on this host only from artifact, not from the host's apt sources/);
      expect(queryIn(t.dpkg, 'dtest-hello')).toBeNull();
    });

    it('refuses option-looking and path-like names in desired state, and the agent refuses them when an action is forged', async () => {
      for (const name of ['-x', '--root=/', '../etc', 'a/b', 'Nginx', 'x']) {
        const parsed = resourceSpec.safeParse({ type: 'package', name, version: '1.0-1' });
        expect(parsed.success, name).toBe(false);
      }
      for (const version of ['1.0 -1', 'v1.0', '1.0-', '-1', '1:', 'a:1.0', '1.0/x', '0:1.0-1', '01:1.0']) {
        expect(resourceSpec.safeParse({ type: 'package', name: 'dtest-hello', version }).success, version).toBe(false);
      }
      expect(resourceSpec.safeParse({ type: 'package', name: 'dtest-hello', version: '1:2.0~rc1+dfsg-1' }).success).toBe(true);
      expect(
        resourceSpec.safeParse({ type: 'package', name: 'dtest-hello', version: '1.0-1', sha256: 'ab'.repeat(32) }).success,
      ).toBe(false);

      const t = await packageNode([{ name: '*', from: ['artifact', 'apt'] }]);
      for (const name of ['--root=/', '../../etc/passwd']) {
        const forged = action(t.node, 'hello', 'package.install', { name, version: '1.0-1' }, { observed_marker: null });
        const failure = await expectRefusal(t.apply(forged), 'InvalidAction');
        expect(failure.message).toMatch(/its spec is malformed \(name: /);
        // observe never hands such a name to dpkg-query either
        const seen = (await t.observe({ hello: { type: 'package', name, version: '1.0-1' } })).resources.hello;
        expect(seen).toMatchObject({ value: null, marker: null });
        expect(seen.obstruction).toMatch(/starts with "-"|contains "\/"/);
      }
    });

    it('refuses to install over a package on hold (OperatorOwnedRefusal naming apt-mark unhold), and the hold stays', async () => {
      const t = await packageNode();
      dpkgIn(t.dpkg, ['--install', (await t.deb({ name: 'dtest-hello', version: '1.0-1' })).artifact]);
      selectIn(t.dpkg, 'dtest-hello', 'hold');
      const hello = spec('dtest-hello', '1.1-1', await t.deb({ name: 'dtest-hello', version: '1.1-1' }));
      const failure = await expectRefusal(t.apply(await install(t, 'hello', hello)), 'OperatorOwnedRefusal');
      expect(failure.message).toMatch(
        /package dtest-hello is on hold in dpkg's selections on this host \(hi: dtest-hello 1\.0-1 installed \(hold\)\), which is the host operator's decision, and installing 1\.1-1 would clear it — fix: .*apt-mark unhold dtest-hello/,
      );
      expect(queryIn(t.dpkg, 'dtest-hello')).toEqual({ version: '1.0-1', abbrev: 'hi ' });
    });

    it('refuses a forged package.remove as destructive, and the package stays installed', async () => {
      const t = await packageNode();
      dpkgIn(t.dpkg, ['--install', (await t.deb({ name: 'dtest-hello', version: '1.0-1' })).artifact]);
      const forged = action(
        t.node,
        'hello',
        'package.remove',
        { name: 'dtest-hello', version: '1.0-1' },
        { observed_marker: null },
      );
      const failure = await expectRefusal(t.apply(forged), 'DestructiveActionRefusal');
      expect(failure.message).toContain('package.remove is destructive and the agent never carries out destructive actions');
      expect(queryIn(t.dpkg, 'dtest-hello')).toEqual({ version: '1.0-1', abbrev: 'ii ' });
    });

    it('reports an installed package that conflicts with the desired one as an obstruction, and refuses to push it out', async () => {
      const t = await packageNode();
      const legacy = await t.deb({ name: 'dtest-legacy', version: '1.0-1', relations: { conflicts: 'dtest-hello (<< 2.0)' } });
      dpkgIn(t.dpkg, ['--install', legacy.artifact]);
      const hello = spec('dtest-hello', '1.1-1', await t.deb({ name: 'dtest-hello', version: '1.1-1' }));
      const seen = (await t.observe({ hello })).resources.hello;
      expect(seen.obstruction).toBe(
        'installing dtest-hello 1.1-1 would push out dtest-legacy 1.0-1 (it declares Conflicts: dtest-hello (<< 2.0): dpkg makes room only by removing it), and Datum never removes a package — fix: an operator removes dtest-legacy by hand if it should go, or desired state names a version of dtest-hello that does not push it out',
      );
      // A version the relation does not name is no obstruction.
      expect((await t.observe({ hello: spec('dtest-hello', '2.0-1') })).resources.hello.obstruction).toBeNull();

      await expectRefusal(t.apply(await install(t, 'hello', hello)), 'DestructiveActionRefusal');
      expect(queryIn(t.dpkg, 'dtest-legacy')).toEqual({ version: '1.0-1', abbrev: 'ii ' });
      // A name another package's relation mentions is known to dpkg, unselected and not installed.
      expect(queryIn(t.dpkg, 'dtest-hello')).toEqual({ version: '', abbrev: 'un ' });
      expect(seen).toMatchObject({ value: null, detail: { status: 'not-installed', selection: 'unknown' } });
    });

    it('refuses a .deb whose own Conflicts or Replaces would push an installed package out, before dpkg runs', async () => {
      const t = await packageNode();
      dpkgIn(t.dpkg, ['--install', (await t.deb({ name: 'dtest-other', version: '3-1' })).artifact]);
      const conflicting = await t.deb({ name: 'dtest-hello', version: '1.1-1', relations: { conflicts: 'dtest-other' } });
      const byConflicts = await expectRefusal(
        t.apply(await install(t, 'hello', spec('dtest-hello', '1.1-1', conflicting))),
        'DestructiveActionRefusal',
      );
      expect(byConflicts.message).toMatch(
        /would push out dtest-other 3-1 \(dtest-hello 1\.1-1 declares Conflicts: dtest-other: dpkg makes room only by removing it\)/,
      );
      // Replaces alone, with every file of dtest-other in it: dpkg would take them over and note
      // dtest-other's "disappearance" (removed from its database), exiting 0.
      const takeover = await t.deb({
        name: 'dtest-hello',
        version: '1.2-1',
        relations: { replaces: 'dtest-other' },
        files: { 'usr/share/dtest-other/version.txt': { content: 'taken over\n' } },
      });
      const byReplaces = await expectRefusal(
        t.apply(await install(t, 'hello', spec('dtest-hello', '1.2-1', takeover), { desired_generation: 13 })),
        'DestructiveActionRefusal',
      );
      expect(byReplaces.message).toMatch(
        /declares Replaces: dtest-other: dpkg hands its files over, and removes it once none are left/,
      );
      expect(queryIn(t.dpkg, 'dtest-other')).toEqual({ version: '3-1', abbrev: 'ii ' });
      expect(await fs.readFile(path.join(t.dpkg, 'usr/share/dtest-other/version.txt'), 'utf8')).toBe('dtest-other 3-1\n');
    });
  });

  describe('probe 4: the installer exits 0 and the version does not move', () => {
    it("dpkg refusing a downgrade (the host's refuse-downgrade in $HOME/.dpkg.cfg): applied, exit 0, and the marker the apply returns is the old one", async () => {
      const t = await packageNode();
      dpkgIn(t.dpkg, ['--install', (await t.deb({ name: 'dtest-hello', version: '2.0-1' })).artifact]);
      const home = path.join(t.base, 'home');
      await fs.mkdir(home);
      await fs.writeFile(path.join(home, '.dpkg.cfg'), 'refuse-downgrade\n');
      const before = (await t.observe({ hello: spec('dtest-hello', '1.1-1') })).resources.hello;
      const saved = process.env.HOME;
      process.env.HOME = home;
      try {
        const hello = spec('dtest-hello', '1.1-1', await t.deb({ name: 'dtest-hello', version: '1.1-1' }));
        const ev = await t.apply(await install(t, 'hello', hello));
        expect(ev.outcome).toBe('applied');
        expect(ev.detail).toMatch(
          /dpkg exited 0 \(".*will not downgrade dtest-hello from 2\.0-1 to 1\.1-1, skipping"\), and dpkg's database now reports dtest-hello 2\.0-1 installed\./,
        );
        expect(ev.marker_after).toBe(before.marker);
      } finally {
        process.env.HOME = saved;
      }
      expect(queryIn(t.dpkg, 'dtest-hello')).toEqual({ version: '2.0-1', abbrev: 'ii ' });
    });
  });

  describe('install from apt', () => {
    it("installs name=version from the host's apt sources (a flat repository, APT_CONFIG confined), downgrading when asked", async () => {
      const t = await packageNode();
      const repo = path.join(t.base, 'repo');
      // 2.1-1 conflicts with dtest-other, which is installed: apt would remove it.
      dpkgIn(t.dpkg, ['--install', (await t.deb({ name: 'dtest-other', version: '3-1' })).artifact]);
      for (const version of ['1.0-1', '1.1-1', '2.0-1', '2.1-1']) {
        const deb = await t.deb({
          name: 'dtest-hello',
          version,
          relations: version === '2.1-1' ? { conflicts: 'dtest-other' } : {},
        });
        await fs.mkdir(repo, { recursive: true });
        await fs.copyFile(deb.artifact, path.join(repo, path.basename(deb.artifact)));
      }
      const aptConfig = await confinedApt(path.join(t.base, 'apt'), repo, t.dpkg);
      await t.writePackageConfig({ aptConfig });

      const ev = await t.apply(await install(t, 'hello', spec('dtest-hello', '2.0-1')));
      expect(ev.detail).toMatch(
        new RegExp(
          `^ran apt-get install dtest-hello=2\\.0-1 with APT_CONFIG=${aptConfig}; apt-get exited 0 .*now reports dtest-hello 2\\.0-1 installed\\.$`,
        ),
      );
      expect(queryIn(t.dpkg, 'dtest-hello')).toEqual({ version: '2.0-1', abbrev: 'ii ' });
      await t.apply(await install(t, 'hello', spec('dtest-hello', '1.1-1'), { desired_generation: 13 }));
      expect(queryIn(t.dpkg, 'dtest-hello')).toEqual({ version: '1.1-1', abbrev: 'ii ' });

      const missing = await expectRefusal(
        t.apply(await install(t, 'hello', spec('dtest-hello', '3.0-1'), { desired_generation: 14 })),
        'PackageInstallFailed',
      );
      expect(missing.message).toMatch(
        /failed: apt has no dtest-hello 3\.0-1 in the host's package lists; nothing was fetched or installed — fix: publish that version in the host's apt sources and update the host's package lists/,
      );
      expect(queryIn(t.dpkg, 'dtest-hello')).toEqual({ version: '1.1-1', abbrev: 'ii ' });

      const pushy = await expectRefusal(
        t.apply(await install(t, 'hello', spec('dtest-hello', '2.1-1'), { desired_generation: 15 })),
        'DestructiveActionRefusal',
      );
      expect(pushy.message).toMatch(/would push out dtest-other 3-1 \(dtest-hello 2\.1-1 declares Conflicts: dtest-other/);
      expect(queryIn(t.dpkg, 'dtest-other')).toEqual({ version: '3-1', abbrev: 'ii ' });
    });
  });

  describe('how dpkg and apt-get run', () => {
    // Running, not a zombie waiting for a parent (here PID 1) to reap it.
    const alive = async (pid: number) => {
      const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
      return stat !== null && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
    };
    const living = async (pids: number[]) => (await Promise.all(pids.map(async (p) => ((await alive(p)) ? [p] : [])))).flat();

    it('are killed with their whole process group when the activity is cancelled, and after their time', async () => {
      // A tool that starts a child of its own (as apt-get starts dpkg), and says both pids.
      const script = 'sleep 60 & echo "$$ $!"; wait';
      const env = new MockActivityEnvironment();
      const running: Promise<ToolRun> = env.run(() => runTool('sh', ['-c', script], { timeoutMs: 60_000 }));
      await new Promise((r) => setTimeout(r, 300));
      env.cancel();
      const run = await running;
      const pids = run.stdout.trim().split(' ').map(Number);
      expect(pids).toHaveLength(2);
      expect(run).toMatchObject({ ended: 'cancelled', code: null, signal: 'SIGTERM' });
      await new Promise((r) => setTimeout(r, 100));
      expect(await living(pids)).toEqual([]);

      const timed = await runTool('sh', ['-c', script], { timeoutMs: 300 });
      expect(timed).toMatchObject({ ended: 'timeout', code: null });
      await new Promise((r) => setTimeout(r, 100));
      expect(await living(timed.stdout.trim().split(' ').map(Number))).toEqual([]);
    });

    it("run with a PATH that has /usr/sbin, the C locale, the agent's HOME, and none of its DPKG_ROOT or DPKG_ADMINDIR", async () => {
      const saved = { ...process.env };
      Object.assign(process.env, {
        DPKG_ROOT: '/nonexistent',
        DPKG_ADMINDIR: '/nonexistent',
        LANG: 'de_DE.UTF-8',
        PATH: '/usr/bin:/bin',
      });
      try {
        const run = await runTool('sh', ['-c', 'env'], { timeoutMs: 10_000 });
        const env = Object.fromEntries(
          run.stdout
            .trim()
            .split('\n')
            .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
        );
        expect(env).toMatchObject({
          PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
          LANG: 'C',
          LC_ALL: 'C',
          HOME: saved.HOME,
        });
        expect(Object.keys(env).filter((k) => k.startsWith('DPKG_'))).toEqual([]);
      } finally {
        for (const k of ['DPKG_ROOT', 'DPKG_ADMINDIR', 'LANG', 'PATH']) {
          if (saved[k] === undefined) delete process.env[k];
          else process.env[k] = saved[k];
        }
      }
    });
  });

  describe('import', () => {
    it('declares an installed package at its version, from apt; a package that is not installed is a problem', async () => {
      const t = await packageNode();
      dpkgIn(t.dpkg, ['--install', (await t.deb({ name: 'dtest-hello', version: '1.0-1' })).artifact]);
      const config = agentConfig.parse(JSON.parse(await fs.readFile(t.configPath, 'utf8')));
      const ctx = { node: t.node, root: t.root, config };
      expect(await packageProvider.importSpec!(ctx, 'hello', 'dtest-hello')).toEqual({
        spec: { type: 'package', name: 'dtest-hello', version: '1.0-1' },
      });
      expect(await packageProvider.importSpec!(ctx, 'x', 'dtest-none')).toEqual({
        problem: `dpkg under ${t.dpkg} has no package dtest-none installed, so there is nothing to declare`,
      });
      expect(await packageProvider.importSpec!(ctx, 'x', '--root=/')).toEqual({
        problem: '"--root=/" starts with "-", so it would read as an option',
      });
    });
  });
});
