// Service provider with real processes: the demo app started on 7.3 and restarted on 7.4, judged
// by what its health endpoint reports (build and config digest), surviving an agent restart,
// replayed from the journal without a second restart, and stopped by stopServices.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentActivities } from '../../src/agent/activities';
import { startTicks, stopServices } from '../../src/agent/services';
import { desiredValue, fileBytes, type AuthorizedAction, type ResourceSpec } from '../../src/domain';
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

afterEach(cleanupNodes);

const CONFIG_PATH = 'etc/app/config.json';

/** Desired resources of the worked example at a given build and config. */
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

function serviceAction(
  t: TestNode,
  kind: 'service.start' | 'service.restart',
  res: Record<string, ResourceSpec>,
  over: Partial<AuthorizedAction> = {},
) {
  const expected = desiredValue('app', res) as { build: string; config_sha256: string };
  return action(
    t.node,
    'app',
    kind,
    { command: ['node', 'server.js'], build: expected.build, config_path: CONFIG_PATH, config_sha256: expected.config_sha256 },
    over,
  );
}

/** What an enforcing pass would do: release, then config, then the service. */
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
  const a = serviceAction(t, kind, res);
  return { res, action: a, evidence: await t.apply(a) };
}

const pidOf = (marker: string | null) => Number(/^pid:(\d+):\d+$/.exec(marker ?? '')?.[1]);

describe('service provider', () => {
  it('starts the demo app on 7.3, restarts it on 7.4, and observes what its health endpoint reports', async () => {
    const t = await makeNode();
    const out = path.join(t.base, 'artifacts');
    const a73 = await buildArtifact({ version: '7.3', outDir: out });
    const a74 = await buildArtifact({ version: '7.4', outDir: out });

    expect((await t.observe(resources(a73, '7.3', { workers: 4 }))).resources.app).toMatchObject({ value: null, marker: null });

    const started = await converge(t, a73, '7.3', { workers: 4 }, 'service.start');
    const pid73 = pidOf(started.evidence.marker_after);
    expect(pid73).toBeGreaterThan(0);
    expect(started.evidence.detail).toMatch(
      new RegExp(
        `^started pid ${pid73} on port \\d+ \\(node server\\.js in releases/7\\.3, DATUM_CONFIG=etc/app/config\\.json\\); health reported build "7\\.3"`,
      ),
    );
    expect(started.evidence.marker_after).toBe(`pid:${pid73}:${await startTicks(pid73)}`);

    const obs73 = await t.observe(started.res);
    expect(obs73.resources.app.value).toEqual(desiredValue('app', started.res));
    expect(obs73.resources.app.value).toEqual({ build: '7.3', config_sha256: sha256(fileBytes({ workers: 4 })) });
    expect(obs73.resources.app.marker).toBe(started.evidence.marker_after);
    expect(obs73.resources.app.detail).toMatchObject({ running: true, pid: pid73 });

    // Alive on 7.3 is not converged to 7.4: the desired 7.4 value differs from what it reports.
    const want74 = resources(a74, '7.4', { workers: 8 });
    expect((await t.observe(want74)).resources.app.value).not.toEqual(desiredValue('app', want74));

    const restarted = await converge(t, a74, '7.4', { workers: 8 }, 'service.restart');
    const pid74 = pidOf(restarted.evidence.marker_after);
    expect(pid74).not.toBe(pid73);
    expect(restarted.evidence.detail).toMatch(
      new RegExp(
        `^stopped pid ${pid73} with SIGTERM, then started pid ${pid74} on port \\d+ .*releases/7\\.4.*; health reported build "7\\.4"`,
      ),
    );
    expect(await startTicks(pid73)).toBeNull();

    const obs74 = await t.observe(restarted.res);
    expect(obs74.resources.app.value).toEqual(desiredValue('app', restarted.res));
    expect(obs74.resources.app.value).toEqual({ build: '7.4', config_sha256: sha256(fileBytes({ workers: 8 })) });
    expect(obs74.resources.app.marker).toBe(restarted.evidence.marker_after);

    // The process belongs to no agent instance: a new one (an agent restart) still sees it.
    const fresh = createAgentActivities(t.configPath);
    const again = await t.observe(restarted.res, fresh);
    expect(again.resources.app).toMatchObject({ value: obs74.resources.app.value, marker: obs74.resources.app.marker });

    // A replay of the restart through the new instance answers from the journal: no new pid.
    const replay = await t.apply(restarted.action, fresh);
    expect(replay).toEqual({ ...restarted.evidence, outcome: 'replayed' });
    expect((await t.observe(restarted.res, fresh)).resources.app.marker).toBe(restarted.evidence.marker_after);

    // stopServices cleans up: the process is gone and the service observed as not running.
    const stopped = await stopServices(t.root);
    expect(stopped).toEqual([{ key: 'app', pid: pid74, result: `stopped pid ${pid74} with SIGTERM` }]);
    expect(await startTicks(pid74)).toBeNull();
    expect((await t.observe(restarted.res)).resources.app).toMatchObject({ value: null, marker: null });
    expect(await fs.readFile(path.join(t.root, '.datum/services/app.log'), 'utf8')).toContain('demo-app build 7.4 listening');
  });

  it('reports the build the process says it runs, not the one installed (probe 4): the marker is still ours', async () => {
    const t = await makeNode();
    const out = path.join(t.base, 'artifacts');
    const liar = await buildArtifact({ version: '7.4', outDir: out, reportBuild: '7.3' });
    const { res, evidence } = await converge(t, liar, '7.4', { workers: 8 }, 'service.start');
    expect(evidence.outcome).toBe('applied');
    expect(evidence.detail).toContain('health reported build "7.3"');
    const obs = await t.observe(res);
    expect(obs.resources.build.value).toEqual({ version: '7.4', sha256: liar.sha256 });
    expect(obs.resources.app.value).toEqual({ build: '7.3', config_sha256: sha256(fileBytes({ workers: 8 })) });
    expect(obs.resources.app.value).not.toEqual(desiredValue('app', res));
    expect(obs.resources.app.marker).toBe(evidence.marker_after);
  });

  it('takes observed_at at the start: a slow health endpoint makes the snapshot older, never younger', async () => {
    const t = await makeNode();
    const slow = `
      const http = require('node:http');
      const fs = require('node:fs');
      const sum = require('node:crypto').createHash('sha256').update(fs.readFileSync(process.env.DATUM_CONFIG)).digest('hex');
      http.createServer((req, res) => setTimeout(() => res.end(JSON.stringify({ build: 'slow', config_sha256: sum })), 1500)).listen(Number(process.env.PORT), '127.0.0.1');
      process.on('SIGTERM', () => process.exit(0));
    `;
    const art = await writeArtifact(t, 'slow.tgz', tarGz([{ name: 'slow.js', content: slow }]));
    await t.apply(releaseAction(t, 'slow', art));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, 'x'));
    await t.apply(
      action(t.node, 'app', 'service.start', {
        command: ['node', 'slow.js'],
        build: 'slow',
        config_path: CONFIG_PATH,
        config_sha256: sha256('x'),
      }),
    );

    const before = Date.now();
    const obs = await t.observe({ app: { type: 'service', release: 'build', config: 'config', command: ['node', 'slow.js'] } });
    expect(obs.resources.app.value).toEqual({ build: 'slow', config_sha256: sha256('x') });
    const observedAt = Date.parse(obs.observed_at);
    const heartbeatAt = Date.parse(obs.heartbeat_at!);
    expect(observedAt - before).toBeLessThan(500);
    expect(heartbeatAt - observedAt).toBeGreaterThanOrEqual(1400);
  });

  it('records a process that exits at once, with nothing running and health not answering', async () => {
    const t = await makeNode();
    const art = await writeArtifact(t, 'crash.tgz', tarGz([{ name: 'crash.js', content: 'process.exit(3);\n' }]));
    await t.apply(releaseAction(t, '0.1', art));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, 'x'));
    const ev = await t.apply(
      action(t.node, 'app', 'service.start', {
        command: ['node', 'crash.js'],
        build: '0.1',
        config_path: CONFIG_PATH,
        config_sha256: sha256('x'),
      }),
    );
    expect(ev.outcome).toBe('applied');
    expect(ev.detail).toMatch(/exited|did not answer/);
    const obs = await t.observe({ app: { type: 'service', release: 'build', config: 'config', command: ['node', 'crash.js'] } });
    expect(obs.resources.app).toMatchObject({ value: null, marker: null, detail: { running: false } });
  });

  it('fails a command that cannot be started (ServiceStartFailed), and a start with no current release', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, 'x'));
    const spec = { command: ['no-such-program-datum'], build: '1', config_path: CONFIG_PATH, config_sha256: sha256('x') };
    const noRelease = await expectRefusal(t.apply(action(t.node, 'app', 'service.start', spec)), 'ServiceStartFailed');
    expect(noRelease.message).toMatch(/^service\.start of "app" on node N-24 failed: there is no current release/);
    await t.apply(releaseAction(t, '1', await writeArtifact(t, 'one.tgz', tarGz([{ name: 'x.js', content: '' }]))));
    const failure = await expectRefusal(t.apply(action(t.node, 'app', 'service.start', spec)), 'ServiceStartFailed');
    expect(failure.message).toContain('ENOENT');
  });

  it('never takes a reused pid for the service: not observed as running, never signalled', async () => {
    const t = await makeNode();
    const art = await buildArtifact({ version: '7.4', outDir: path.join(t.base, 'artifacts') });
    await t.apply(releaseAction(t, '7.4', { artifact: art.file, sha256: art.sha256 }));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 8 }));
    // The state of a service that died long ago, whose pid now belongs to this test process.
    await fs.mkdir(path.join(t.root, '.datum/services'), { recursive: true });
    const stale = {
      key: 'app',
      pid: process.pid,
      port: 1,
      start_ticks: '1',
      command: ['node', 'server.js'],
      started_at: '2026-01-01T00:00:00.000Z',
      cwd: t.root,
      config_path: CONFIG_PATH,
      log: 'x',
    };
    await fs.writeFile(path.join(t.root, '.datum/services/app.json'), JSON.stringify(stale));
    const res = resources(art, '7.4', { workers: 8 });
    expect((await t.observe(res)).resources.app).toMatchObject({
      value: null,
      marker: null,
      detail: { running: false, last_pid: process.pid },
    });
    const ev = await t.apply(serviceAction(t, 'service.start', res));
    expect(ev.detail).toMatch(/^started pid/); // nothing was stopped: the old pid is not ours
    expect((await t.observe(res)).resources.app.value).toEqual(desiredValue('app', res));
  });

  it('restarts a service that ignores SIGTERM by SIGKILL after 5 s', async () => {
    const t = await makeNode();
    const stubborn = `
      require('node:http').createServer((q, s) => s.end(JSON.stringify({ build: 'stubborn', config_sha256: null }))).listen(Number(process.env.PORT), '127.0.0.1');
      process.on('SIGTERM', () => {});
    `;
    await t.apply(releaseAction(t, 's', await writeArtifact(t, 's.tgz', tarGz([{ name: 's.js', content: stubborn }]))));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, 'x'));
    const spec = { command: ['node', 's.js'], build: 'stubborn', config_path: CONFIG_PATH, config_sha256: null };
    const first = await t.apply(action(t.node, 'app', 'service.start', spec));
    const pid = pidOf(first.marker_after);
    const second = await t.apply(action(t.node, 'app', 'service.restart', spec));
    expect(second.detail).toContain(`killed pid ${pid} with SIGKILL after it ignored SIGTERM for 5 s`);
    expect(await startTicks(pid)).toBeNull();
  }, 30_000);
});
