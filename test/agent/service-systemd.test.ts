// The systemd backend of managed services (agent.yaml `services: { backend: systemd }`): the
// argv a person would see for systemd-run and systemctl, unit names from hostile node and service
// names, the agent.yaml field, the refusal at start and at apply on a host without systemd (this
// one's real behaviour where PID 1 is not systemd; on a host booted with systemd those skip, as
// test/skip-policy.ts allows), and the backend against a real systemd manager
// (test/agent/systemd-manager.ts, which installs systemd where it is missing).

import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAgentActivities } from '../../src/agent/activities';
import {
  judgeUnit,
  parseShow,
  parseSystemdVersion,
  systemctlShowArgv,
  systemctlStopArgv,
  systemdEscape,
  systemdRunArgv,
  unitName,
  unitUser,
  type UnitRequest,
} from '../../src/agent/services/systemd';
import { startTicks, stopServices } from '../../src/agent/services';
import { runAgents } from '../../src/agent/worker';
import { InvalidAgentConfig, desiredValue, fileBytes, type AuthorizedAction, type ResourceSpec } from '../../src/domain';
import { parseAgentConfigText } from '../../src/schemas/documents';
import {
  action,
  buildArtifact,
  cleanupNodes,
  expectRefusal,
  fileAction,
  makeNode,
  releaseAction,
  sha256,
  tarGz,
  writeArtifact,
  type TestNode,
} from './helpers';
import { userManager, type TestManager } from './systemd-manager';
import { INSTALL_TIMEOUT_MS, toolOrSkip } from '../helpers/tools';

afterEach(cleanupNodes);

const ROOT = path.resolve(__dirname, '../..');
const CONFIG_PATH = 'etc/app/config.json';
const BOOTED = existsSync('/run/systemd/system');
const INIT = readFileSync('/proc/1/comm', 'utf8').trim();

describe('unit names', () => {
  it.each([
    ['N-24', 'app', 'datum-N\\x2d24-app.service'],
    ['web.eu-1', 'api_v2', 'datum-web.eu\\x2d1-api_v2.service'],
    ['.hidden', 'x', 'datum-\\x2ehidden-x.service'],
    ['a b', 'c', 'datum-a\\x20b-c.service'],
    ['nœud', 'ç', 'datum-n\\xc5\\x93ud-\\xc3\\xa7.service'],
    ['$(rm -rf /)', "it's", 'datum-\\x24\\x28rm\\x20\\x2drf\\x20\\x2f\\x29-it\\x27s.service'],
    ['x\\y', 'a:b', 'datum-x\\x5cy-a:b.service'],
  ])('node %j, service %j: %s', (node, key, unit) => {
    expect(unitName(node, key)).toBe(unit);
    expect(unit).toMatch(/^[A-Za-z0-9:_.\\-]+\.service$/); // only characters systemd allows in a unit name
  });

  it(
    'escapes each part as systemd-escape does (except "/", which it would turn into "-")',
    { timeout: INSTALL_TIMEOUT_MS },
    async (ctx) => {
      const escape = await toolOrSkip(ctx, 'systemd-escape');
      for (const name of ['N-24', '.hidden', 'a b', 'nœud', '$(rm -rf)', 'x\\y', "it's", 'a:b_c.d', '-', '..', 'tab\there']) {
        const real = spawnSync(escape, ['--', name], { encoding: 'utf8' }).stdout.trim();
        expect(systemdEscape(name), name).toBe(real);
      }
    },
  );

  it('gives different units to names that would run together', () => {
    expect(unitName('a-b', 'c')).not.toBe(unitName('a', 'b-c'));
    expect(unitName('a/b', 'c')).not.toBe(unitName('a-b', 'c'));
    expect(unitName('a', 'b\\x2dc')).not.toBe(unitName('a', 'b-c'));
  });

  it('stays within 255 characters for the longest names, still one unit per node and service', () => {
    const node = '-'.repeat(63);
    const long = unitName(node, 'k'.repeat(63));
    expect(long).toMatch(/^datum-[0-9a-f]{32}\.service$/);
    expect(unitName(node, 'k'.repeat(62))).not.toBe(long);
    expect(unitName('N'.repeat(63), 'k'.repeat(63)).length).toBeLessThanOrEqual(255);
  });
});

describe('systemd-run and systemctl argv', () => {
  const request = (over: Partial<UnitRequest> = {}): UnitRequest => ({
    unit: 'datum-N\\x2d24-app.service',
    manager: 'system',
    version: 255,
    description: 'Datum service app (/var/lib/datum/N-24/releases/7.4)',
    cwd: '/var/lib/datum/N-24/releases/7.4',
    command: ['node', 'server.js', '--name=a b', "it's", '$HOME', '${PATH}', '%n'],
    env: {
      PORT: '4100',
      DATUM_CONFIG: '/var/lib/datum/N-24/etc/app config.json',
      DATUM_SERVICE_NONCE: 'ab'.repeat(16),
      PATH: '/usr/bin',
    },
    log: '/var/lib/datum/N-24/.datum/services/app.log',
    properties: {},
    ...over,
  });

  it('starts a transient exec service, one argument per element, $ kept by --expand-environment=no (systemd 254+)', () => {
    expect(
      systemdRunArgv(request({ user: 'datum-app', properties: { MemoryMax: '512M', CPUQuota: '50%', TimeoutStopSec: 30 } })),
    ).toEqual([
      '--unit=datum-N\\x2d24-app.service',
      '--description=Datum service app (/var/lib/datum/N-24/releases/7.4)',
      '--service-type=exec',
      '--collect',
      '--quiet',
      '--no-ask-password',
      '--expand-environment=no',
      '--working-directory=/var/lib/datum/N-24/releases/7.4',
      '--uid=datum-app',
      '--setenv=DATUM_CONFIG=/var/lib/datum/N-24/etc/app config.json',
      `--setenv=DATUM_SERVICE_NONCE=${'ab'.repeat(16)}`,
      '--setenv=PATH=/usr/bin',
      '--setenv=PORT=4100',
      '--property=StandardOutput=append:/var/lib/datum/N-24/.datum/services/app.log',
      '--property=StandardError=append:/var/lib/datum/N-24/.datum/services/app.log',
      '--property=TimeoutStopSec=5',
      '--property=CPUQuota=50%',
      '--property=MemoryMax=512M',
      '--property=TimeoutStopSec=30', // the operator's, after Datum's: the later one wins
      '--',
      'node',
      'server.js',
      '--name=a b',
      "it's",
      '$HOME',
      '${PATH}',
      '%n',
    ]);
  });

  it('before systemd 254 writes a literal $ as $$ (the manager would expand it), never in the program', () => {
    const argv = systemdRunArgv(request({ version: 252, command: ['./$bin', '$HOME', 'a$$b', 'plain'] }));
    expect(argv).not.toContain('--expand-environment=no');
    expect(argv.slice(argv.indexOf('--'))).toEqual(['--', './$bin', '$$HOME', 'a$$$$b', 'plain']);
  });

  it('talks to the user manager with --user, and runs no --uid there', () => {
    const argv = systemdRunArgv(request({ manager: 'user' }));
    expect(argv[0]).toBe('--user');
    expect(argv.some((a) => a.startsWith('--uid'))).toBe(false);
    expect(systemctlShowArgv('user', 'u.service')).toEqual([
      '--user',
      'show',
      '--property=LoadState,ActiveState,SubState,MainPID,InvocationID,Environment',
      '--',
      'u.service',
    ]);
    expect(systemctlStopArgv('system', 'datum-N\\x2d24-app.service')).toEqual([
      'stop',
      '--no-ask-password',
      '--',
      'datum-N\\x2d24-app.service',
    ]);
  });

  it("runs a system unit as the agent's own user unless agent.yaml names one (as the process backend does)", () => {
    const settings = { manager: 'system' as const, properties: {} };
    expect(unitUser(settings, 990)).toBe('990');
    expect(unitUser(settings, 0)).toBeUndefined();
    expect(unitUser({ ...settings, user: 'datum-app' }, 990)).toBe('datum-app');
    expect(unitUser({ manager: 'user', properties: {} }, 990)).toBeUndefined();
  });

  it('reads systemctl show and systemd-run --version', () => {
    expect(parseShow('MainPID=42\nEnvironment="A=x y" B=1\nActiveState=active\n')).toEqual({
      MainPID: '42',
      Environment: '"A=x y" B=1',
      ActiveState: 'active',
    });
    expect(parseSystemdVersion('systemd 252 (252.39-1~deb12u2)\n+PAM +AUDIT')).toBe(252);
    expect(parseSystemdVersion('not systemd')).toBeNull();
  });
});

describe('judging a unit from systemctl show', () => {
  const nonce = `DATUM_SERVICE_NONCE=${'cd'.repeat(16)}`;
  const rec = { unit: 'datum-N\\x2d24-app.service', pid: 42, invocation_id: 'inv1', nonce };
  const live = {
    LoadState: 'loaded',
    ActiveState: 'active',
    SubState: 'running',
    MainPID: '42',
    InvocationID: 'inv1',
    Environment: `PORT=1 ${nonce}`,
  };
  it.each([
    ['the instance Datum started', live, 'ours'],
    ['its environment quoted by systemctl', { ...live, Environment: `"DATUM_CONFIG=/a b" ${nonce}` }, 'ours'],
    ['stopping (still running)', { ...live, ActiveState: 'deactivating' }, 'ours'],
    [
      'a unit that is not loaded (exited and collected)',
      { LoadState: 'not-found', ActiveState: 'inactive', MainPID: '0' },
      'gone',
    ],
    ['a failed unit', { ...live, ActiveState: 'failed', MainPID: '0' }, 'gone'],
    ['a unit without a main process', { ...live, MainPID: '0' }, 'gone'],
    ['a unit without the nonce', { ...live, Environment: 'PORT=1' }, 'foreign'],
    ['a nonce only as part of another value', { ...live, Environment: `"X=${nonce}"` }, 'foreign'],
    ['a unit started again outside Datum', { ...live, InvocationID: 'inv2', MainPID: '43' }, 'foreign'],
    ['another main pid in the same invocation', { ...live, MainPID: '43' }, 'foreign'],
  ])('%s: %s', (_what, show, kind) => {
    expect(judgeUnit(show, rec).kind).toBe(kind);
  });
});

describe('agent.yaml services', () => {
  const file = '/etc/datum/agent.yaml';
  const parse = (services: string) => parseAgentConfigText(`node: N-24\nroot: /var/lib/datum/N-24\n${services}`, file);
  const refusal = (services: string): string => {
    try {
      parse(services);
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidAgentConfig);
      return (err as Error).message;
    }
    throw new Error('accepted');
  };

  it('defaults to the process backend, today’s behaviour', () => {
    expect(parse('').services).toEqual({ backend: 'process', systemd: { manager: 'system', properties: {} } });
  });

  it('takes the systemd backend with a manager, a user and unit properties', () => {
    const yaml =
      'services:\n  backend: systemd\n  systemd:\n    user: datum-app\n    properties: { MemoryMax: 512M, CPUQuota: "50%", TasksMax: 64 }\n';
    expect(parse(yaml).services).toEqual({
      backend: 'systemd',
      systemd: { manager: 'system', user: 'datum-app', properties: { MemoryMax: '512M', CPUQuota: '50%', TasksMax: 64 } },
    });
  });

  it.each([
    ['services: { backend: docker }', 'services.backend: backend must be process or systemd — fix: write backend: process'],
    [
      'services: { backend: systemd, systemd: { properties: { Restart: always } } }',
      'services.systemd.properties.Restart: Restart is set by Datum itself',
    ],
    ['services: { backend: systemd, systemd: { properties: { ExecStart: /bin/sh } } }', 'ExecStart is set by Datum itself'],
    ['services: { systemd: { properties: { memorymax: 1G } } }', '"memorymax" is not a unit property name'],
    ['services: { systemd: { properties: { MemoryMax: "1G\\nExecStart=/bin/sh" } } }', 'a unit property value must be one line'],
    [
      'services: { systemd: { manager: user, user: root } }',
      'services.systemd.user: a user manager runs everything as its own user',
    ],
    ['services: { systemd: { manager: session } }', 'manager must be system or user'],
    ['services: { systemd: { user: "root; rm" } }', 'services.systemd.user: is not a user name or uid'],
    ['services: { backend: systemd, scope: true }', 'services'],
  ])('refuses %s, naming the field and the fix', (yaml, words) => {
    const message = refusal(`${yaml}\n`);
    expect(message).toContain(`${file}: invalid agent config`);
    expect(message).toContain(words);
    expect(message).toContain(' — fix: ');
  });
});

/** agent.yaml of `t` with a `services` section added. */
async function useBackend(t: TestNode, services: Record<string, unknown>): Promise<void> {
  const doc = JSON.parse(await fs.readFile(t.configPath, 'utf8')) as Record<string, unknown>;
  await fs.writeFile(t.configPath, JSON.stringify({ ...doc, services }, null, 2));
}

describe('on a host without systemd', () => {
  const skip = BOOTED ? `this host runs systemd (PID 1 is ${INIT})` : undefined;
  const expected = (file: string) =>
    `${file}: invalid agent config; nothing from this file was applied:\n` +
    `  - services.backend: is systemd, but systemd is not running on this host (PID 1 is ${INIT})` +
    ' — fix: set services.backend: process in agent.yaml, or run the agent on a host booted with systemd';

  it('the agent refuses to start, naming agent.yaml, the field, what is wrong and the fix', async (ctx) => {
    ctx.skip(skip !== undefined, skip ?? '');
    const t = await makeNode();
    await useBackend(t, { backend: 'systemd' });
    const start = runAgents({ configPaths: [t.configPath], address: '127.0.0.1:1' });
    await expect(start).rejects.toBeInstanceOf(InvalidAgentConfig);
    await expect(start).rejects.toThrow(expected(t.configPath));
  });

  it('`datum agent` exits 1 with that message before it connects anywhere', async (ctx) => {
    ctx.skip(skip !== undefined, skip ?? '');
    const t = await makeNode();
    await useBackend(t, { backend: 'systemd', systemd: { properties: { MemoryMax: '1G' } } });
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/datum.js'), 'agent', '--config', t.configPath], {
      env: { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(stderr).toBe(`datum agent: ${expected(t.configPath)}\n`);
    expect(code).toBe(1);
  });

  it('an apply after agent.yaml switched to systemd fails with the same words, and starts nothing', async (ctx) => {
    ctx.skip(skip !== undefined, skip ?? '');
    const t = await makeNode();
    const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
    await t.apply(releaseAction(t, '7.4', { artifact: art.file, sha256: art.sha256 }));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 8 }));
    await useBackend(t, { backend: 'systemd' });
    const spec = {
      command: ['node', 'server.js'],
      build: '7.4',
      config_path: CONFIG_PATH,
      config_sha256: sha256(fileBytes({ workers: 8 })),
    };
    const failure = await expectRefusal(t.apply(action(t.node, 'app', 'service.start', spec)), 'ServiceStartFailed');
    expect(failure.message).toBe(
      `service.start of "app" on node N-24 failed: agent.yaml sets services.backend: systemd, but systemd is not running on this host (PID 1 is ${INIT})` +
        ' — fix: set services.backend: process in agent.yaml, or run the agent on a host booted with systemd',
    );
    expect(await fs.readdir(path.join(t.root, '.datum/services')).catch(() => [])).toEqual([]);
  });
});

describe('the systemd backend against a real systemd manager', () => {
  let found: TestManager | { skip: string } = { skip: 'not looked for yet' };
  beforeAll(async () => {
    found = await userManager();
  }, INSTALL_TIMEOUT_MS);
  afterAll(async () => {
    if ('stop' in found) await found.stop();
  }, 60_000);
  const skipUnless = (ctx: { skip: (cond: boolean, why: string) => void }) =>
    ctx.skip('skip' in found, `no systemd manager to run units in: ${'skip' in found ? found.skip : ''}`);

  const systemctl = (...args: string[]) => spawnSync('systemctl', ['--user', ...args], { encoding: 'utf8' });
  const show = (unit: string) =>
    Object.fromEntries(
      systemctl('show', '--property=MainPID,ActiveState,LoadState', '--', unit)
        .stdout.trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    ) as Record<string, string>;
  const ppidOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]);

  function resources(
    art: { file: string; sha256: string },
    version: string,
    content: Record<string, number>,
  ): Record<string, ResourceSpec> {
    return {
      build: { type: 'release', version, artifact: art.file, sha256: art.sha256 },
      config: { type: 'file', path: CONFIG_PATH, content },
      app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
    };
  }
  async function converge(
    t: TestNode,
    art: { file: string; sha256: string },
    version: string,
    content: Record<string, number>,
    kind: 'service.start' | 'service.restart',
  ) {
    const res = resources(art, version, content);
    await t.apply(releaseAction(t, version, { artifact: art.file, sha256: art.sha256 }));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, content));
    const expected = desiredValue('app', res) as { build: string; config_sha256: string };
    const a = action(t.node, 'app', kind, {
      command: ['node', 'server.js'],
      build: expected.build,
      config_path: CONFIG_PATH,
      config_sha256: expected.config_sha256,
    });
    return { res, action: a, evidence: await t.apply(a) };
  }
  const UNIT = 'datum-N\\x2d24-app.service';
  const pidIn = (detail: string) =>
    Number(new RegExp(`${UNIT.replaceAll('\\', '\\\\').replaceAll('.', '\\.')} \\(pid (\\d+)\\)`).exec(detail)?.[1]);

  it('starts the demo app as a unit on 7.3, restarts it on 7.4 with systemctl, observes it like a child, and it outlives the agent', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await useBackend(t, { backend: 'systemd', systemd: { manager: 'user', properties: { MemoryMax: '256M' } } });
    const out = path.join(t.base, 'artifacts');
    const a73 = await buildArtifact({ version: '7.3', outDir: out });
    const a74 = await buildArtifact({ version: '7.4', outDir: out });

    const started = await converge(t, a73, '7.3', { workers: 4 }, 'service.start');
    const pid73 = pidIn(started.evidence.detail);
    expect(started.evidence.detail).toMatch(
      /^started datum-N\\x2d24-app\.service \(pid \d+\) on port \d+ \(node server\.js in releases\/7\.3, DATUM_CONFIG=etc\/app\/config\.json\); health reported build "7\.3"/,
    );
    expect(started.evidence.marker_after).toBe(`pid:${pid73}:${await startTicks(pid73)}`);
    // systemd's own account: the unit runs that pid, as a child of the manager, not of the agent.
    expect(show(UNIT)).toMatchObject({ MainPID: String(pid73), ActiveState: 'active' });
    expect(ppidOf(pid73)).not.toBe(process.pid);
    expect(systemctl('show', '--property=MemoryMax', '--', UNIT).stdout.trim()).toBe(`MemoryMax=${256 * 1024 * 1024}`);

    const obs73 = await t.observe(started.res);
    expect(obs73.resources.app.value).toEqual({ build: '7.3', config_sha256: sha256(fileBytes({ workers: 4 })) });
    expect(obs73.resources.app.marker).toBe(started.evidence.marker_after);
    expect(obs73.resources.app.detail).toMatchObject({ running: true, pid: pid73, unit: UNIT, command: ['node', 'server.js'] });
    // started_at is the launch's own time, the one its start line in the log carries.
    const startLine = /--- datum (\S+): starting/.exec(await fs.readFile(path.join(t.root, '.datum/services/app.log'), 'utf8'));
    expect(obs73.resources.app.detail.started_at).toBe(startLine?.[1]);

    const restarted = await converge(t, a74, '7.4', { workers: 8 }, 'service.restart');
    const pid74 = pidIn(restarted.evidence.detail.split(', then ')[1]);
    expect(restarted.evidence.detail).toMatch(
      new RegExp(
        `^stopped datum-N\\\\x2d24-app\\.service \\(pid ${pid73}\\) with systemctl stop, then started datum-N\\\\x2d24-app\\.service \\(pid ${pid74}\\) on port \\d+ .*releases/7\\.4.*; health reported build "7\\.4"`,
      ),
    );
    expect(await startTicks(pid73)).toBeNull();
    expect(show(UNIT)).toMatchObject({ MainPID: String(pid74), ActiveState: 'active' });

    // Another agent instance (an agent restart) finds the same unit and answers a replay from the journal.
    const fresh = createAgentActivities(t.configPath);
    const again = await t.observe(restarted.res, fresh);
    expect(again.resources.app).toMatchObject({
      value: desiredValue('app', restarted.res),
      marker: restarted.evidence.marker_after,
    });
    expect(await t.apply(restarted.action, fresh)).toEqual({ ...restarted.evidence, outcome: 'replayed' });

    expect(await fs.readFile(path.join(t.root, '.datum/services/app.log'), 'utf8')).toMatch(
      /--- datum .*: starting \["node","server\.js"\] .* as datum-N\\x2d24-app\.service\n[^]*demo-app build 7\.4 listening/,
    );
    const stopped = await stopServices(t.root);
    expect(stopped).toEqual([{ key: 'app', pid: pid74, result: `stopped ${UNIT} (pid ${pid74}) with systemctl stop` }]);
    expect(show(UNIT)).toMatchObject({ LoadState: 'not-found', ActiveState: 'inactive' });
    expect((await t.observe(restarted.res)).resources.app).toMatchObject({ value: null, marker: null });
  }, 90_000);

  it('passes every argument through unchanged ($, quotes, spaces, %) and the contract environment', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await useBackend(t, { backend: 'systemd', systemd: { manager: 'user' } });
    const echo = `
      require('node:http').createServer((q, s) => s.end(JSON.stringify({ build: 'echo', config_sha256: null, argv: process.argv.slice(2), nonce: Boolean(process.env.DATUM_SERVICE_NONCE), config: process.env.DATUM_CONFIG, cwd: process.cwd() }))).listen(Number(process.env.PORT), '127.0.0.1');
      process.on('SIGTERM', () => process.exit(0));
    `;
    await t.apply(releaseAction(t, 'e', await writeArtifact(t, 'e.tgz', tarGz([{ name: 'echo.js', content: echo }]))));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, 'x'));
    const args = ['$HOME', '${PATH}', '$$', 'it\'s "quoted"', 'two words', '%n %h', '\\x2d'];
    const command = ['node', 'echo.js', ...args];
    await t.apply(
      action(t.node, 'app', 'service.start', { command, build: 'echo', config_path: CONFIG_PATH, config_sha256: null }),
    );
    const obs = await t.observe({ app: { type: 'service', release: 'build', config: 'config', command } });
    expect(obs.resources.app.detail.health).toEqual({
      build: 'echo',
      config_sha256: null,
      argv: args,
      nonce: true,
      config: path.join(t.root, CONFIG_PATH),
      cwd: path.join(t.root, 'releases/e'),
    });
  }, 60_000);

  it("fails a program that does not exist (ServiceStartFailed, systemd-run's words), and records one that exits at once", async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await useBackend(t, { backend: 'systemd', systemd: { manager: 'user' } });
    await t.apply(
      releaseAction(t, 'c', await writeArtifact(t, 'c.tgz', tarGz([{ name: 'crash.js', content: 'process.exit(3);\n' }]))),
    );
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, 'x'));
    const missing = { command: ['no-such-program-datum'], build: 'c', config_path: CONFIG_PATH, config_sha256: sha256('x') };
    const failure = await expectRefusal(t.apply(action(t.node, 'app', 'service.start', missing)), 'ServiceStartFailed');
    expect(failure.message).toMatch(
      /^service\.start of "app" on node N-24 failed: systemd-run could not start \["no-such-program-datum"\] in .*releases\/c as datum-N\\x2d24-app\.service: Failed to find executable no-such-program-datum.* — fix: check the command of the service resource/,
    );
    expect(show(UNIT)).toMatchObject({ LoadState: 'not-found' });

    const crash = { ...missing, command: ['node', 'crash.js'] };
    const ev = await t.apply(action(t.node, 'app', 'service.start', crash));
    expect(ev.outcome).toBe('applied');
    expect(ev.detail).toMatch(/^started datum-N\\x2d24-app\.service.*(exited|did not answer)/);
    const obs = await t.observe({ app: { type: 'service', release: 'build', config: 'config', command: ['node', 'crash.js'] } });
    expect(obs.resources.app).toMatchObject({ value: null, marker: null, detail: { running: false } });
    expect(show(UNIT)).toMatchObject({ LoadState: 'not-found' }); // --collect: a failed unit does not linger
  }, 60_000);

  it('restarts a service that ignores SIGTERM: systemd kills it at TimeoutStopSec', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await useBackend(t, { backend: 'systemd', systemd: { manager: 'user' } });
    const stubborn = `
      require('node:http').createServer((q, s) => s.end(JSON.stringify({ build: 'stubborn', config_sha256: null }))).listen(Number(process.env.PORT), '127.0.0.1');
      process.on('SIGTERM', () => console.log('stubborn: SIGTERM ignored'));
    `;
    await t.apply(releaseAction(t, 's', await writeArtifact(t, 's.tgz', tarGz([{ name: 's.js', content: stubborn }]))));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, 'x'));
    const spec = { command: ['node', 's.js'], build: 'stubborn', config_path: CONFIG_PATH, config_sha256: null };
    const first = await t.apply(action(t.node, 'app', 'service.start', spec));
    const pid = pidIn(first.detail);
    const second = await t.apply(action(t.node, 'app', 'service.restart', spec));
    expect(second.detail).toMatch(
      new RegExp(`^stopped datum-N\\\\x2d24-app\\.service \\(pid ${pid}\\) with systemctl stop, then started`),
    );
    // It ignored SIGTERM and is gone all the same: SIGKILL at TimeoutStopSec.
    expect(await fs.readFile(path.join(t.root, '.datum/services/app.log'), 'utf8')).toContain('stubborn: SIGTERM ignored');
    expect(await startTicks(pid)).toBeNull();
  }, 60_000);

  it('reports a unit started again outside Datum, and never stops it', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await useBackend(t, { backend: 'systemd', systemd: { manager: 'user' } });
    const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
    const { res, action: start } = await converge(t, art, '7.4', { workers: 8 }, 'service.start');
    expect(systemctl('restart', '--', UNIT).status).toBe(0);
    const pid = Number(show(UNIT).MainPID);
    const obs = await t.observe(res);
    expect(obs.resources.app).toMatchObject({
      value: null,
      marker: null,
      detail: { running: false, refusal: 'ServiceIdentityUnverified' },
    });
    expect(obs.resources.app.obstruction).toMatch(
      /datum-N\\x2d24-app\.service was started again outside Datum .*nothing was signalled/,
    );
    await expectRefusal(t.apply(action(t.node, 'app', 'service.restart', start.spec)), 'ServiceIdentityUnverified');
    expect(show(UNIT)).toMatchObject({ MainPID: String(pid), ActiveState: 'active' });
    systemctl('stop', '--', UNIT);
  }, 60_000);

  it('an agent killed with SIGKILL right after systemd-run leaves one unit, which the retry adopts', async (ctx) => {
    skipUnless(ctx);
    const t = await makeNode();
    await useBackend(t, { backend: 'systemd', systemd: { manager: 'user' } });
    const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
    const res = resources(art, '7.4', { workers: 8 });
    await t.apply(releaseAction(t, '7.4', { artifact: art.file, sha256: art.sha256 }));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 8 }));
    const expected = desiredValue('app', res) as { build: string; config_sha256: string };
    const start: AuthorizedAction = action(
      t.node,
      'app',
      'service.start',
      { command: ['node', 'server.js'], build: expected.build, config_path: CONFIG_PATH, config_sha256: expected.config_sha256 },
      { observed_marker: null },
    );
    const agent = path.join(ROOT, 'dist/src/agent/activities/index.js');
    const script = `require(${JSON.stringify(agent)}).applyAction(process.argv[1], JSON.parse(process.argv[2])).then(() => process.exit(0), (e) => { console.error(e); process.exit(3); });`;
    const child = spawn(process.execPath, ['-e', script, t.configPath, JSON.stringify({ node: t.node, action: start })], {
      env: { ...process.env, DATUM_TEST_CRASH_AT: 'service.spawned' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const [, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
    expect(signal).toBe('SIGKILL');
    const orphan = Number(show(UNIT).MainPID);
    expect(orphan).toBeGreaterThan(0);
    await expect(fs.lstat(path.join(t.root, '.datum/services/app.json'))).rejects.toThrow(/ENOENT/);

    const retried = await t.apply(start);
    expect(retried.detail).toMatch(
      new RegExp(
        `^adopted datum-N\\\\x2d24-app\\.service \\(pid ${orphan}\\) on port \\d+, started by an attempt the agent did not live to record`,
      ),
    );
    expect(show(UNIT).MainPID).toBe(String(orphan));
    expect((await t.observe(res)).resources.app).toMatchObject({
      value: expected,
      detail: { running: true, pid: orphan, unit: UNIT },
    });
  }, 60_000);
});
