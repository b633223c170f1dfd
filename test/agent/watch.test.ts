// The watch against the loop's last observation (WatchRequest.baseline): a change made between
// that observation and the watch's start is reported at once instead of waiting for the resync,
// and an unchanged node is not reported changed for any resource type, so the baseline cannot
// make a loop pass again and again. Real files, a real release and a real service process.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { desiredValue, fileBytes, type ResourceSpec } from '../../src/domain';
import type { Observation, WatchRequest, WatchResult } from '../../src/contract';
import { watchNode } from '../../src/agent/watch';
import { AgentJournal } from '../../src/agent/node/journal';
import { action, buildArtifact, cleanupNodes, fileAction, makeNode, releaseAction, runActivity, type TestNode } from './helpers';

afterEach(cleanupNodes);

const CONFIG_PATH = 'etc/app/config.json';

/** A node with one resource of every type, converged: release, config, flag, a running service and a directory. */
async function convergedNode(): Promise<{ t: TestNode; resources: Record<string, ResourceSpec> }> {
  const t = await makeNode();
  const art = await buildArtifact({ version: '7.3', outDir: path.join(t.base, 'artifacts') });
  const resources: Record<string, ResourceSpec> = {
    build: { type: 'release', version: '7.3', artifact: art.file, sha256: art.sha256 },
    config: { type: 'file', path: CONFIG_PATH, content: { workers: 4 } },
    maintenance: { type: 'flag', value: false },
    app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
    data: { type: 'directory', path: 'srv/data', mode: '0750' },
  };
  await t.apply(action(t.node, 'data', 'directory.ensure', { path: 'srv/data', mode: '0750' }));
  await t.apply(releaseAction(t, '7.3', { artifact: art.file, sha256: art.sha256 }));
  await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 4 }));
  await t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: false }));
  const app = desiredValue('app', resources) as { build: string; config_sha256: string };
  await t.apply(
    action(t.node, 'app', 'service.start', {
      command: ['node', 'server.js'],
      build: app.build,
      config_path: CONFIG_PATH,
      config_sha256: app.config_sha256,
    }),
  );
  return { t, resources };
}

const baselineOf = (o: Observation) => Object.fromEntries(Object.entries(o.resources).map(([k, r]) => [k, r.marker]));

function watch(t: TestNode, request: Omit<WatchRequest, 'node'>): Promise<WatchResult> {
  return runActivity((r: WatchRequest) => t.acts.watch(r), { node: t.node, ...request });
}

describe('the watch against the last observation', () => {
  it('reports at once a change made after the observation and before the watch started', async () => {
    const { t, resources } = await convergedNode();
    const observed = await t.observe(resources);
    // Between the loop's probe and its watch: another writer edits the config.
    await fs.writeFile(path.join(t.root, CONFIG_PATH), fileBytes({ workers: 99 }));
    const started = Date.now();
    const result = await watch(t, { resources, window_ms: 60_000, baseline: baselineOf(observed) });
    expect(result).toMatchObject({ changed: ['config'], reason: 'changed since observation' });
    expect(Date.now() - started).toBeLessThan(30_000); // far inside the window: it did not wait for it

    // Without the baseline (a loop from before it existed) the same watch sees nothing new.
    expect(await watch(t, { resources, window_ms: 300 })).toMatchObject({ changed: [], reason: 'window elapsed' });
  });

  it('reports nothing for an unchanged node of every resource type: observe and watch spell markers alike', async () => {
    const { t, resources } = await convergedNode();
    const observed = await t.observe(resources);
    expect(Object.values(observed.resources).every((r) => typeof r.marker === 'string')).toBe(true);
    expect(await watch(t, { resources, window_ms: 300, baseline: baselineOf(observed) })).toMatchObject({
      changed: [],
      reason: 'window elapsed',
    });
    // A resource the observation could not mark (null), or one it did not report, is compared
    // with what the watch reads first: nothing to report either.
    const partial = { ...baselineOf(observed), config: null, maintenance: undefined } as unknown as Record<string, string | null>;
    expect(await watch(t, { resources, window_ms: 300, baseline: partial })).toMatchObject({ changed: [] });
  });

  it("sees a chmod of a managed directory by its parent's inotify, with no poll to see it", async () => {
    const { t, resources } = await convergedNode();
    const observed = await t.observe(resources);
    const request: WatchRequest = { node: t.node, resources, window_ms: 3_600_000, baseline: baselineOf(observed) };
    let waiting!: () => void;
    const isWaiting = new Promise<void>((resolve) => (waiting = resolve));
    const noPolls = { pollMs: 3_600_000, safetyPollMs: 3_600_000, waiting };
    const watching = runActivity((r: WatchRequest) => watchNode(t.configPath, r, noPolls), request);
    await isWaiting;
    await fs.chmod(path.join(t.root, 'srv/data'), 0o777);
    expect(await watching).toMatchObject({ changed: ['data'], reason: 'changed' });
  }, 60_000);

  it('reports a service that died after the observation', async () => {
    const { t, resources } = await convergedNode();
    const observed = await t.observe(resources);
    const pid = Number(/^pid:(\d+):/.exec(observed.resources.app.marker ?? '')?.[1]);
    process.kill(pid, 'SIGKILL');
    await expect
      .poll(() =>
        fs.readFile(`/proc/${pid}/stat`, 'utf8').then(
          (s) => s.split(' ')[2],
          () => 'gone',
        ),
      )
      .toMatch(/^(Z|X|gone)$/);
    const result = await watch(t, { resources, window_ms: 60_000, baseline: baselineOf(observed) });
    expect(result).toMatchObject({ changed: ['app'], reason: 'changed since observation' });
  });

  it('sees a service it spawned die by the exit event, with no poll to see it', async () => {
    // The service is this process's child (the test is the agent here). The polls and the window
    // are an hour: only the child's exit can wake the watch (without it, the test times out).
    const { t, resources } = await convergedNode();
    const observed = await t.observe(resources);
    const pid = Number(/^pid:(\d+):/.exec(observed.resources.app.marker ?? '')?.[1]);
    const request: WatchRequest = { node: t.node, resources, window_ms: 3_600_000, baseline: baselineOf(observed) };
    let waiting!: () => void;
    const isWaiting = new Promise<void>((resolve) => (waiting = resolve));
    const noPolls = { pollMs: 3_600_000, safetyPollMs: 3_600_000, waiting };
    const watching = runActivity((r: WatchRequest) => watchNode(t.configPath, r, noPolls), request);
    // Killed once the watch has read the service alive and waits.
    await isWaiting;
    expect(await fs.readdir(path.join(t.root, '.datum/watches'))).toHaveLength(1); // its task token, kept while it runs
    process.kill(pid, 'SIGKILL');
    expect(await watching).toMatchObject({ changed: ['app'], reason: 'changed' });
    // Ended: its task token is no longer kept, so a restarted agent has nothing to end.
    expect(await fs.readdir(path.join(t.root, '.datum/watches'))).toEqual([]);
  }, 60_000);
});

describe('the watch hands back the observation it takes after a change (observe_on_change)', () => {
  it('returns the snapshot of the changed node, read as observe reads it, and moves the fence as observe does', async () => {
    const { t, resources } = await convergedNode();
    const observed = await t.observe(resources);
    await fs.writeFile(path.join(t.root, CONFIG_PATH), fileBytes({ workers: 99 }));
    const result = await watch(t, {
      resources,
      window_ms: 60_000,
      baseline: baselineOf(observed),
      observe_on_change: { generation: 13 },
    });
    expect(result).toMatchObject({ changed: ['config'], reason: 'changed since observation' });
    const handed = result.observation!;
    // The other writer's bytes, as a plain observe reads them now: same markers for every resource.
    const again = await t.observe(resources);
    expect(baselineOf(handed)).toEqual(baselineOf(again));
    expect(handed.resources.config.marker).not.toBe(observed.resources.config.marker);
    expect(Date.parse(handed.observed_at)).toBeGreaterThanOrEqual(Date.parse(result.at) - 1_000);
    // Observing generation 13 fenced the node at 13 (its writes were 12's), as an observe of 13 does.
    expect(await new AgentJournal(t.root).acceptedGeneration()).toMatchObject({ generation: 13, by: 'observe' });
  });

  it('hands back nothing when nothing changed, or when the loop did not ask', async () => {
    const { t, resources } = await convergedNode();
    const observed = await t.observe(resources);
    const quiet = await watch(t, {
      resources,
      window_ms: 300,
      baseline: baselineOf(observed),
      observe_on_change: { generation: 1 },
    });
    expect(quiet).toMatchObject({ changed: [], reason: 'window elapsed' });
    expect(quiet).not.toHaveProperty('observation');
    await fs.writeFile(path.join(t.root, CONFIG_PATH), fileBytes({ workers: 5 }));
    const unasked = await watch(t, { resources, window_ms: 60_000, baseline: baselineOf(observed) });
    expect(unasked.changed).toEqual(['config']);
    expect(unasked).not.toHaveProperty('observation');
  });
});
