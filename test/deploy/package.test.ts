// The agent's packages (`npm run package`, src/packaging): built here into a scratch directory;
// the .deb read with no dpkg (test/helpers/packages.ts reads ar, tar and the RPM header) and its
// files checked against the .rpm's and the tarball's. Then the real dpkg installs it into a
// confined root that has the shared libraries the package names and no nodejs
// (test/helpers/dpkg.ts), where the package as it was before it shipped its own Node.js is
// refused; and the seed's worked example runs against the agent started from that installed tree
// by the unit's own command line, with no node on its PATH, on a real dev server with the real
// controller worker. (Where dpkg cannot run, not a Debian host or not root, the worked example
// runs on the .deb's files unpacked by hand instead.)
//
// The first run on a machine builds nfpm from the Go module proxy into the cache (a few minutes,
// once: src/packaging/nfpm.ts); every later run finds it there.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, promises as fs, readFileSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { execFile } from 'node:child_process';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROL_TASK_QUEUE, WORKFLOW_TYPES, recheckSignal, reconcileWorkflowId, type RolloutWorkflow } from '../../src/contract';
import { fileBytes } from '../../src/domain';
import { projectRoot } from '../../src/worker/paths';
import { confinedRoot, dpkgIn, dpkgUnavailable } from '../helpers/dpkg';
import { INSTALL_TIMEOUT_MS, toolOrSkip } from '../helpers/tools';
import { MAINTENANCE } from '../helpers/fleet';
import { arMembers, gunzip, readRpm, tarEntries, type Installed, type RpmPackage } from '../helpers/packages';
import { statusesOf, useStack } from '../helpers/stack';

const run = promisify(execFile);
const ROOT = projectRoot();
const VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const UNIT = '/usr/lib/systemd/system/datum-agent@.service';
const PROGRAM = '/usr/lib/datum-agent/datum-agent.js';
const RUNTIME = '/usr/lib/datum-agent/node';
const NATIVE = '/usr/lib/datum-agent/releases/x86_64-unknown-linux-gnu/index.node';
/** The package's dependencies before it shipped its own Node.js (package.json's engines). */
const OLD_DEPENDS = 'nodejs (>= 20.10)';
const noDpkg = dpkgUnavailable();

interface Built {
  tarball: string;
  deb: string;
  rpm: string;
  meta: string;
}

let scratch: string;
let built: Built;
/** The .deb, unpacked: its data.tar under `sysroot`, its control files by name. */
let sysroot: string;
let debFiles: Map<string, Installed>;
let control: Map<string, string>;
/** The .deb's control fields. */
let fields: Record<string, string>;
let rpm: RpmPackage;
/** The root dpkg installed the .deb into, and what dpkg said (undefined where it cannot run). */
let installed: { root: string; status: number | null; output: string } | undefined;

beforeAll(async () => {
  scratch = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-package-test-')));
  const out = path.join(scratch, 'out');
  // The command `npm run package` runs once set-up is done (the global set-up built dist/).
  const { stdout } = await run(process.execPath, [path.join(ROOT, 'dist/src/packaging/main.js'), '--out', out], {
    maxBuffer: 16 * 1024 * 1024,
  });
  const names = await fs.readdir(out);
  const one = (suffix: string) =>
    path.join(
      out,
      names.find((n) => n.endsWith(suffix))!,
    );
  built = { tarball: one('.tar.gz'), deb: one('.deb'), rpm: one('.rpm'), meta: one('.meta.json') };
  expect(stdout).toContain(built.deb);

  const members = arMembers(await fs.readFile(built.deb));
  expect([...members.keys()]).toEqual(['debian-binary', 'control.tar.gz', 'data.tar.gz']);
  sysroot = path.join(scratch, 'sysroot');
  await fs.mkdir(sysroot);
  const data = path.join(scratch, 'data.tar.gz');
  await fs.writeFile(data, members.get('data.tar.gz')!);
  await tar.x({ file: data, cwd: sysroot, preservePaths: false });
  debFiles = tarEntries(gunzip(members.get('data.tar.gz')!)).entries;
  control = tarEntries(gunzip(members.get('control.tar.gz')!), ['/control', '/postinst', '/postrm', '/conffiles']).texts;
  fields = Object.fromEntries(
    control
      .get('/control')!
      .split('\n')
      .filter((l) => /^\w[\w-]*:/.test(l))
      .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
  );
  rpm = readRpm(await fs.readFile(built.rpm));
  if (noDpkg === undefined) {
    const root = path.join(scratch, 'installed');
    await hostWith(root, fields.Depends);
    installed = { root, ...dpkgIn(root, ['--install', built.deb]) };
  }
}, 20 * 60_000);

/**
 * A confined root with this host's packages that `depends` names, and dash: the /bin/sh dpkg runs
 * the package's maintainer scripts with (postinst, postrm: test/helpers/dpkg.ts). No nodejs.
 */
async function hostWith(root: string, depends: string): Promise<void> {
  const names = depends.split(',').map((d) => d.trim().split(/[\s(]/)[0]);
  await confinedRoot(root, [...names, 'dash']);
}

afterAll(async () => {
  if (scratch) await fs.rm(scratch, { recursive: true, force: true });
});

/** Files and links (directories aside: a .deb lists every parent, an .rpm only those it owns). */
const leaves = (files: Map<string, Installed>) =>
  new Map([...files].filter(([, f]) => f.type !== 'dir').sort(([a], [b]) => a.localeCompare(b)));

describe('the datum-agent packages', () => {
  it('hold the same files, modes and links in the tarball, the .deb and the .rpm', async () => {
    const tarball = tarEntries(gunzip(await fs.readFile(built.tarball))).entries;
    expect(leaves(rpm.files)).toEqual(leaves(debFiles));
    expect(leaves(tarball)).toEqual(leaves(debFiles));
    // The directories the .rpm owns (so removing it removes them) are in the .deb too.
    for (const [dir, f] of rpm.files) if (f.type === 'dir') expect(debFiles.get(dir), dir).toMatchObject({ type: 'dir' });
  });

  it('install the agent, its unit, the datum user and the /etc/datum layout', () => {
    expect(debFiles.get('/usr/bin/datum-agent')).toEqual({
      type: 'symlink',
      mode: 0,
      target: '../lib/datum-agent/datum-agent.js',
    });
    expect(debFiles.get(PROGRAM)).toEqual({ type: 'file', mode: 0o755 });
    expect(debFiles.get(RUNTIME)).toEqual({ type: 'file', mode: 0o755 });
    expect(debFiles.get(NATIVE)).toMatchObject({ type: 'file' });
    expect(debFiles.get(UNIT)).toEqual({ type: 'file', mode: 0o644 });
    expect(debFiles.get('/usr/lib/sysusers.d/datum.conf')).toEqual({ type: 'file', mode: 0o644 });
    for (const dir of ['/etc/datum', '/etc/datum/agents']) expect(rpm.files.get(dir)).toMatchObject({ type: 'dir' });
    expect(debFiles.get('/etc/datum/temporal.env.example')).toMatchObject({ type: 'file' });
    // The unit's command is the packaged program, on the agent.yaml of its instance.
    const unit = readFileSync(path.join(sysroot, UNIT), 'utf8');
    expect(unit).toMatch(
      new RegExp(`^ExecStart=${RUNTIME} (--[\\w-]+(=\\S+)? )*${PROGRAM} --config /etc/datum/agents/%i\\.yaml$`, 'm'),
    );
    expect(readFileSync(path.join(sysroot, 'usr/lib/sysusers.d/datum.conf'), 'utf8')).toMatch(/^u datum /m);
    // The example is a conffile: an upgrade keeps an operator's edit.
    expect(control.get('/conffiles')?.trim()).toBe('/etc/datum/temporal.env.example');
    expect(rpm.configFiles).toEqual(['/etc/datum/temporal.env.example']);
  });

  it('depend on glibc and libstdc++, not on nodejs, and create the datum user and reload systemd on install, nothing more', () => {
    expect(fields).toMatchObject({ Package: 'datum-agent', Version: `${VERSION}-1`, Architecture: 'amd64' });
    expect(fields.Maintainer).toBeTruthy();
    expect(fields.Depends).toMatch(/^libc6 \(>= [\d.]+\), libstdc\+\+6 \(>= [\d.]+\), libgcc-s1 \(>= [\d.]+\)$/);
    for (const field of ['Pre-Depends', 'Recommends']) expect(fields[field]).toBeUndefined();
    expect(rpm).toMatchObject({ name: 'datum-agent', version: VERSION, release: '1' });
    expect(rpm.requires.filter((r) => /node/i.test(r))).toEqual([]);
    for (const script of [control.get('/postinst')!, rpm.postin]) {
      expect(script).toMatch(/systemd-sysusers datum\.conf/);
      expect(script).toMatch(/systemctl daemon-reload/);
    }
    expect(rpm.postun).toMatch(/systemctl daemon-reload/);
  });

  it(
    'depend on the glibc and libstdc++ versions objdump reads from the runtime and the native module',
    { timeout: INSTALL_TIMEOUT_MS },
    async (ctx) => {
      const objdump = await toolOrSkip(ctx, 'objdump');
      // soname → version family → newest version, across both files, as "Version References" lists them.
      const newest = new Map<string, Map<string, string>>();
      const later = (a: string, b: string) => a.localeCompare(b, 'en', { numeric: true }) > 0;
      for (const file of [RUNTIME, NATIVE]) {
        let soname = '';
        for (const line of spawnSync(objdump, ['-p', path.join(sysroot, file)], { encoding: 'utf8' }).stdout.split('\n')) {
          const from = /^\s+required from (\S+):$/.exec(line);
          if (from) soname = from[1];
          const version = /^\s+0x[\da-f]+ 0x[\da-f]+ \d+ ([A-Z]+)_([\d.]+)$/.exec(line);
          if (!version) continue;
          const families = newest.get(soname) ?? new Map<string, string>();
          newest.set(soname, families);
          if (!families.has(version[1]) || later(version[2], families.get(version[1])!)) families.set(version[1], version[2]);
        }
      }
      const rpmRequires = [...newest].flatMap(([soname, f]) => [...f].map(([family, v]) => `${soname}(${family}_${v})(64bit)`));
      expect(rpm.requires.sort()).toEqual(rpmRequires.sort());
      const glibc = [...newest.values()].map((f) => f.get('GLIBC')).filter((v) => v !== undefined);
      const newestGlibc = glibc.reduce((m, v) => (later(v, m) ? v : m));
      expect(fields.Depends).toContain(`libc6 (>= ${newestGlibc})`);
    },
  );

  it('bundle the agent with none of the workflow code or the workflow bundler', async () => {
    const meta = JSON.parse(await fs.readFile(built.meta, 'utf8')) as {
      outputs: Record<string, { inputs: Record<string, { bytesInOutput: number }> }>;
    };
    const inputs = Object.values(meta.outputs).flatMap((o) =>
      Object.entries(o.inputs)
        .filter(([, i]) => i.bytesInOutput > 0)
        .map(([n]) => n),
    );
    expect(inputs).toContain('src/agent/worker.ts');
    expect(inputs.filter((n) => n.startsWith('src/workflows/') || /node_modules\/(webpack|@swc)\//.test(n))).toEqual([]);
    // Run as /usr/bin/datum-agent, the program names its interpreter: the package's node.
    const text = readFileSync(path.join(sysroot, PROGRAM), 'utf8');
    expect(text.startsWith(`#!${RUNTIME}\n`)).toBe(true);
    const licenses = readFileSync(path.join(sysroot, 'usr/share/doc/datum-agent/THIRD-PARTY-LICENSES'), 'utf8');
    expect(licenses).toContain(`Node.js ${process.versions.node} (node)\n\nNode.js is licensed for use as follows:`);
  });
});

describe('the .deb, installed by dpkg on a host with glibc and libstdc++ and no nodejs', () => {
  it('is refused as it was before, when it depended on nodejs: dpkg leaves it unconfigured', async (ctx) => {
    ctx.skip(noDpkg !== undefined, noDpkg ?? '');
    // The same package with the Depends it had: rebuilt by dpkg-deb from its own files.
    const tree = path.join(scratch, 'old-deb');
    const old = path.join(scratch, 'datum-agent-old.deb');
    await run('dpkg-deb', ['--raw-extract', built.deb, tree]);
    const controlFile = path.join(tree, 'DEBIAN/control');
    await fs.writeFile(
      controlFile,
      (await fs.readFile(controlFile, 'utf8')).replace(/^Depends: .*$/m, `Depends: ${OLD_DEPENDS}`),
    );
    await run('dpkg-deb', ['-Zgzip', '-z1', '--build', tree, old], { maxBuffer: 16 * 1024 * 1024 });
    await fs.rm(tree, { recursive: true, force: true });
    const root = path.join(scratch, 'refused');
    await hostWith(root, fields.Depends);

    const result = dpkgIn(root, ['--install', old]);
    expect(result.status, result.output).toBe(1);
    expect(result.output).toContain('dependency problems prevent configuration of datum-agent');
    expect(result.output).toContain(`datum-agent depends on ${OLD_DEPENDS}; however:\n  Package nodejs is not installed.`);
    expect(dpkgIn(root, ['--status', 'datum-agent']).output).toMatch(/^Status: install ok unpacked$/m);
  });

  it('installs with every dependency met: dpkg configures it and finds its files as the package lists them', (ctx) => {
    ctx.skip(noDpkg !== undefined, noDpkg ?? '');
    const { root, status, output } = installed!;
    expect(status, output).toBe(0);
    expect(output).toContain(`Setting up datum-agent (${VERSION}-1)`);
    expect(output).not.toMatch(/dependency problems|warning|error/i);
    // The root knows no nodejs at all: dpkg-query finds no such package.
    expect(dpkgIn(root, ['--status', 'nodejs']).output).toMatch(/package 'nodejs' is not installed/);
    expect(dpkgIn(root, ['--status', 'datum-agent']).output).toMatch(/^Status: install ok installed$/m);
    // Every file against the md5sums in the package, and nothing half-installed in the root.
    expect(dpkgIn(root, ['--verify', 'datum-agent'])).toEqual({ status: 0, output: '' });
    expect(dpkgIn(root, ['--audit'])).toEqual({ status: 0, output: '' });
  });

  it('runs in that root and nowhere else: datum-agent --version and the native module under chroot, no node but its own', (ctx) => {
    ctx.skip(noDpkg !== undefined, noDpkg ?? '');
    const { root } = installed!;
    // The root holds the package, libc6, libstdc++6, libgcc-s1 and dash: nothing else to find.
    const chrooted = (...args: string[]) =>
      spawnSync('chroot', [root, ...args], { encoding: 'utf8', env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } });
    expect(chrooted('/bin/sh', '-c', 'command -v node').status).not.toBe(0);
    const version = chrooted('/usr/bin/datum-agent', '--version');
    expect(version.stderr).toBe('');
    expect(version.stdout.trim()).toBe(`datum-agent ${VERSION}`);
    // The dynamic linker finds everything the native module needs among the packages depended on.
    const native = chrooted(RUNTIME, '-e', `console.log(Object.keys(require(${JSON.stringify(NATIVE)})).length > 0)`);
    expect(native.stderr).toBe('');
    expect(native.stdout.trim()).toBe('true');
  });
});

describe('the worked example, against the agent dpkg installed, with no node on its PATH', () => {
  const stack = useStack();
  let agent: ChildProcess | undefined;
  let output = '';
  const node = 'N-24';
  /** The tree dpkg installed; where it cannot run, the .deb's files unpacked by hand. */
  const tree = () => installed?.root ?? sysroot;
  const config = () => path.join(tree(), 'etc/datum/agents', `${node}.yaml`);
  /** This host's PATH less every directory that has a node: the agent has only its own. */
  const pathWithoutNode = process.env
    .PATH!.split(':')
    .filter((dir) => dir !== '' && !existsSync(path.join(dir, 'node')))
    .join(':');
  /**
   * The demo app is itself a Node.js program, whose runtime is the app's business, not the
   * agent's: its command names this host's node by its path, so nothing needs a node on PATH.
   */
  const app = { type: 'service', release: 'build', config: 'config', command: [process.execPath, 'server.js'] };

  // Before the stack stops (after-hooks run in reverse order).
  afterAll(async () => {
    agent?.kill('SIGTERM');
    if (agent && agent.exitCode === null) await new Promise((r) => agent!.once('exit', r));
  });

  /** agent.yaml where the unit reads it: /etc/datum/agents/<node>.yaml of the installed tree. */
  async function writeAgent(overrides?: Record<string, typeof MAINTENANCE>) {
    await fs.copyFile(await stack.fleet.writeAgent(node, { mode: 'enforce', overrides }), config());
  }

  /** The unit's ExecStart, rooted in the installed tree; the connection as temporal.env would give it. */
  function startPackagedAgent(): ChildProcess {
    const unit = readFileSync(path.join(tree(), UNIT), 'utf8');
    const exec = /^ExecStart=(.*)$/m.exec(unit)![1].replaceAll('%i', node).split(/\s+/);
    const [program, ...args] = exec.map((a) => (a.startsWith('/') ? path.join(tree(), a) : a));
    // Only what a unit's environment has: no NODE_PATH or NODE_OPTIONS, nothing of this checkout,
    // and a PATH on which no node is found.
    const env: Record<string, string> = {
      PATH: pathWithoutNode,
      TEMPORAL_ADDRESS: stack.env.address,
      TEMPORAL_NAMESPACE: 'default',
      // The suite's own TMPDIR (test/global-setup.ts), by which it finds a process a test left running.
      ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
    };
    for (const [, key, value] of unit.matchAll(/^Environment=(\w+)=(.*)$/gm)) env[key] = value;
    const child = spawn(program, args, { cwd: scratch, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    return child;
  }

  /** The seed's starting point: 7.3 converged at generation 11, maintenance overridden and on. Its flag file. */
  async function n24At11WithMaintenance(): Promise<string> {
    await stack.fleet.writeDesired(node, 11, { version: '7.3', extra: { app } });
    await writeAgent();
    agent = startPackagedAgent();
    const gen11 = await stack.startNode(node, 11);
    await stack
      .waitFor(gen11, (s) => s.convergence_status === 'CONVERGED', 90_000)
      .catch((e: Error) => {
        throw new Error(`${e.message}\nagent output:\n${output}`);
      });
    expect(output).toContain(`serving datum-node-${node}`);
    // The operator approves maintenance locally and turns it on by hand.
    await writeAgent({ maintenance: MAINTENANCE });
    const flag = path.join(stack.fleet.root(node), 'flags/maintenance.json');
    await fs.writeFile(flag, 'true\n');
    await gen11.signal(recheckSignal, {});
    await stack.waitFor(
      gen11,
      (s, ledger) => ledger.some((e) => e.operator_exceptions.length > 0) && s.convergence_status === 'CONVERGED',
    );
    return flag;
  }

  it('rolls N-24 out to 7.4: the ledger shows the repair, the app answers 7.4 + D7, maintenance untouched', async () => {
    const flag = await n24At11WithMaintenance();
    const flagBefore = await fs.stat(flag);

    await stack.fleet.writeDesired(node, 12, { version: '7.4', extra: { app } });
    const result = await stack.client.workflow.execute<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: 'datum-rollout/package-test',
      args: [{ generation: 12, nodes: [node] }],
    });
    expect(result.nodes[0]).toMatchObject({ node, status: 'CONVERGED', handed_over_from: [reconcileWorkflowId(node, 11)] });

    // The ledger store holds the repair: only build and app acted on, maintenance an exception.
    const stored = (await stack.ledgerStore.list(node)).filter((e) => e.workflow_id === reconcileWorkflowId(node, 12));
    const repair = stored.find((e) => e.authorized_actions.length > 0)!;
    expect(repair).toMatchObject({ convergence_status: 'CONVERGED', reason: 'CONVERGED_AFTER_REPAIR' });
    expect(repair.authorized_actions.map((a) => `${a.resource_key}:${a.action}`)).toEqual([
      'build:release.install',
      'app:service.restart',
    ]);
    expect(repair.execution_evidence.map((e) => e.outcome)).toEqual(['applied', 'applied']);
    expect(repair.operator_exceptions).toEqual([
      { resource_key: 'maintenance', provenance: MAINTENANCE, desired: false, observed: true },
    ]);
    expect(statusesOf(await stack.ledger(stack.client.workflow.getHandle(reconcileWorkflowId(node, 11)))).at(-1)).toBe(
      'SUPERSEDED/NEWER_GENERATION',
    );

    // Proof from the thing itself: the app answers 7.4 and D7; the flag was not touched.
    const root = stack.fleet.root(node);
    const { port } = JSON.parse(await fs.readFile(path.join(root, '.datum/services/app.json'), 'utf8')) as { port: number };
    const D7 = createHash('sha256')
      .update(fileBytes({ workers: 8 }))
      .digest('hex');
    expect(await (await fetch(`http://127.0.0.1:${port}/health`)).json()).toMatchObject({ build: '7.4', config_sha256: D7 });
    expect(await fs.readFile(flag, 'utf8')).toBe('true\n');
    expect((await fs.stat(flag)).mtimeMs).toBe(flagBefore.mtimeMs);
  });

  it("ran the package's node, program and native module: nothing of this checkout or of the host's Node.js", async () => {
    expect(agent?.exitCode, output).toBeNull();
    expect(pathWithoutNode.split(':').filter((dir) => existsSync(path.join(dir, 'node')))).toEqual([]);
    expect(await fs.realpath(`/proc/${agent!.pid}/exe`)).toBe(path.join(tree(), RUNTIME));
    const maps = await fs.readFile(`/proc/${agent!.pid}/maps`, 'utf8');
    const mapped = new Set(
      maps
        .split('\n')
        .map((l) => l.split(/\s+/)[5])
        .filter((f) => f?.startsWith('/')),
    );
    expect([...mapped].filter((f) => f.endsWith('.node'))).toEqual([path.join(tree(), NATIVE)]);
    expect(mapped).not.toContain(realpathSync(process.execPath));
    expect(maps).not.toContain(path.join(ROOT, 'node_modules'));
  });
});
