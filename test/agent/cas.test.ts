// Issue 10, hole 3, on the agent: what the plan saw is checked at the moment of the write, on
// real files. Per-node fencing, a replay answered from the journal, a stale snapshot refused, a
// moved marker refused as MARKER_MOVED (compare-and-swap) while the other writer's bytes stay,
// a release re-checked right before `current` is switched, and a batch whose earlier action
// changed something the later one depends on (but not its own target) going ahead.

import { promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentActivities } from '../../src/agent/activities';
import { AgentJournal, fenceLockKey, probeLocksForTests } from '../../src/agent/node/journal';
import { withLock } from '../../src/agent/node/lock';
import { fileMarker } from '../../src/agent/markers';
import type { ObserveRequest } from '../../src/contract';
import { desiredValue, fileBytes, type AuthorizedAction, type ResourceSpec } from '../../src/domain';
import {
  action,
  buildArtifact,
  cleanupNodes,
  expectRefusal,
  fileAction,
  makeNode,
  releaseAction,
  runActivity,
  type TestNode,
} from './helpers';

afterEach(cleanupNodes);

const CONFIG_PATH = 'etc/app/config.json';
const config: ResourceSpec = { type: 'file', path: CONFIG_PATH, content: { workers: 4 } };
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
const read = (t: TestNode, rel: string) => fs.readFile(path.join(t.root, rel), 'utf8');

describe('per-node fencing', () => {
  it('refuses an older generation on every resource of the node once a newer one acted on any', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 9 }, { desired_generation: 13 }));
    const late = action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: true }, { desired_generation: 12 });
    const failure = await expectRefusal(t.apply(late), 'StaleGenerationRefusal');
    expect(failure.message).toContain('already accepted generation 13 for node N-24 (first for "config")');
    expect(failure.message).toContain(
      "fix: if generation 13 is right, this loop's intent is old and its node's newer loop acts (datum describe N-24 shows it)",
    );
    expect(failure.message).toContain('datum agent reset-fence --node N-24 --to 12 --by WHO --reason WHY');
    await expect(fs.stat(path.join(t.root, 'flags/maintenance.json'))).rejects.toThrow(/ENOENT/);
    // Durable: a restarted agent fences the same way, from <root>/.datum/fence.json.
    await expectRefusal(t.apply(late, createAgentActivities(t.configPath)), 'StaleGenerationRefusal');
    const fence = JSON.parse(await read(t, '.datum/fence.json')) as { node: { generation: number; resource_key: string } };
    expect(fence.node).toMatchObject({ generation: 13, resource_key: 'config' });
  });

  it('reads a fence written before per-node fencing (per resource only) as the node generation of its newest entry', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, '.datum'), { recursive: true });
    const entry = { generation: 13, accepted_at: ago(60_000), idempotency_key: 'k' };
    await fs.writeFile(path.join(t.root, '.datum/fence.json'), JSON.stringify({ resources: { config: entry } }));
    const late = action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: true }, { desired_generation: 12 });
    await expectRefusal(t.apply(late), 'StaleGenerationRefusal');
  });

  it('accepts a generation before writing, so a write that then fails still fences older ones out', async () => {
    const t = await makeNode();
    const missing = releaseAction(
      t,
      '7.4',
      { artifact: path.join(t.base, 'no-such.tgz'), sha256: 'a'.repeat(64) },
      {
        desired_generation: 13,
      },
    );
    await expectRefusal(t.apply(missing), 'ArtifactUnavailable');
    await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 1 }, { desired_generation: 12 })),
      'StaleGenerationRefusal',
    );
  });
});

describe('a marker moved by Datum itself', () => {
  it('is a plan out of date, not another writer: refused as a stale snapshot, and the loop re-plans', async () => {
    const t = await makeNode();
    // Generation 14 planned from the same snapshot as 13 (the file absent), and 13 wrote first.
    const g13 = fileAction(t.node, 'config', CONFIG_PATH, { workers: 9 }, { desired_generation: 13, observed_marker: 'absent' });
    const g14 = fileAction(t.node, 'config', CONFIG_PATH, { workers: 10 }, { desired_generation: 14, observed_marker: 'absent' });
    const wrote = await t.apply(g13);
    const failure = await expectRefusal(t.apply(g14), 'StaleSnapshotRefusal');
    expect(failure.message).toContain(`by Datum's own write for generation 13`);
    expect(failure.message).toContain(`(marker ${wrote.marker_after}, planned absent)`);
    expect(failure.details?.[0]).toMatchObject({ written_by_generation: 13, current_marker: wrote.marker_after });
    expect(await read(t, CONFIG_PATH)).toContain('"workers": 9');
  });

  it('still fences: an action of a newer generation refused at the marker keeps older generations out', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.writeFile(path.join(t.root, CONFIG_PATH), '{"workers": 2}\n');
    await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 9 }, { desired_generation: 13, observed_marker: 'absent' })),
      'MarkerMoved',
    );
    await expectRefusal(
      t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: true }, { desired_generation: 12 })),
      'StaleGenerationRefusal',
    );
  });
});

describe('the fence moves on an observe too', () => {
  const observeAt = (t: TestNode, generation?: number) =>
    runActivity((r: ObserveRequest) => t.acts.observe(r), { node: t.node, resources: { config }, generation });
  const fenceOf = async (t: TestNode) => JSON.parse(await read(t, '.datum/fence.json')) as { node: Record<string, unknown> };

  it('an observe of generation 13 fences generation 12 out, though 13 had nothing to write', async () => {
    const t = await makeNode();
    await observeAt(t, 13);
    const late = fileAction(t.node, 'config', CONFIG_PATH, { workers: 9 }, { desired_generation: 12 });
    const failure = await expectRefusal(t.apply(late), 'StaleGenerationRefusal');
    expect(failure.message).toContain(
      'it is for generation 12, but this agent already accepted generation 13 for node N-24 (when its workflow observed the node)',
    );
    await expect(fs.stat(path.join(t.root, CONFIG_PATH))).rejects.toThrow(/ENOENT/);
    // Durable, like an apply's: a restarted agent reads it from fence.json.
    expect((await fenceOf(t)).node).toMatchObject({ generation: 13, by: 'observe' });
    await expectRefusal(t.apply(late, createAgentActivities(t.configPath)), 'StaleGenerationRefusal');
    // Generation 13 itself still writes.
    const own = fileAction(t.node, 'config', CONFIG_PATH, { workers: 9 }, { desired_generation: 13 });
    expect((await t.apply(own)).outcome).toBe('applied');
  });

  it('an observe of an older generation, or of none, is still answered and moves nothing back', async () => {
    const t = await makeNode();
    await observeAt(t, 13);
    const before = await read(t, '.datum/fence.json');
    const older = await observeAt(t, 12);
    const none = await observeAt(t);
    expect([older.resources.config.value, none.resources.config.value]).toEqual([null, null]);
    expect(await read(t, '.datum/fence.json')).toBe(before);
  });

  it('a node whose root does not exist yet is fenced too (an older first write would create it)', async () => {
    const t = await makeNode();
    await fs.rm(t.root, { recursive: true });
    await observeAt(t, 13);
    await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 9 }, { desired_generation: 12 })),
      'StaleGenerationRefusal',
    );
  });
});

describe('the fence is checked again at the write itself, under the lock an observe moves it with', () => {
  const observeAt = (t: TestNode, generation: number, resources: ObserveRequest['resources']) =>
    runActivity((r: ObserveRequest) => t.acts.observe(r), { node: t.node, resources, generation });
  const pending = (t: TestNode) => fs.readdir(path.join(t.root, '.datum/pending')).catch(() => []);
  const OBSERVED_13 =
    'it is for generation 12, but this agent already accepted generation 13 for node N-24 (when its workflow observed the node)';

  it("an old generation's slow release install finishes its fetch after a newer generation observed: current does not switch, the release stays unpacked", async () => {
    const t = await makeNode();
    const out = path.join(t.base, 'artifacts');
    const a73 = await buildArtifact({ version: '7.3', outDir: out });
    const a74 = await buildArtifact({ version: '7.4', outDir: out });
    await t.apply(releaseAction(t, '7.3', { artifact: a73.file, sha256: a73.sha256 }));
    const bytes = await fs.readFile(a74.file);
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/gzip' });
      res.write(bytes.subarray(0, 10));
      setTimeout(() => res.end(bytes.subarray(10)), 1_500);
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/app-7.4.tgz`;
      // Generation 12 passed the fence and is fetching 7.4; generation 13 (back to 7.3) observes
      // the node meanwhile and finds nothing to do.
      const applying = t.apply(releaseAction(t, '7.4', { artifact: url, sha256: a74.sha256 }));
      await sleep(500);
      const seen = await observeAt(t, 13, { build: { type: 'release', version: '7.3', artifact: a73.file, sha256: a73.sha256 } });
      expect(seen.resources.build.value).toEqual({ version: '7.3', sha256: a73.sha256 });
      const failure = await expectRefusal(applying, 'StaleGenerationRefusal');
      expect(failure.message).toContain(OBSERVED_13);
      expect(await fs.readlink(path.join(t.root, 'current'))).toBe('releases/7.3');
      expect(
        (await t.observe({ build: { type: 'release', version: '7.3', artifact: a73.file, sha256: a73.sha256 } })).resources.build
          .marker,
      ).toBe(seen.resources.build.marker);
      // Nothing half-done: the fetch stays unpacked (a later install reuses it), no intent is left.
      expect(JSON.parse(await read(t, 'releases/7.4/.datum-release.json'))).toEqual({ version: '7.4', sha256: a74.sha256 });
      expect(await pending(t)).toEqual([]);
      const own = await t.apply(releaseAction(t, '7.4', { artifact: url, sha256: a74.sha256 }, { desired_generation: 13 }));
      expect(own.detail).toContain('reused releases/7.4');
    } finally {
      server.close();
    }
  }, 60_000);

  /**
   * Holds the fence's lock until `write` (generation 12) has passed its first fence check and
   * queued to be accepted, and an observe of generation 13 has queued behind it to move the
   * fence; then lets go. Each step waits for the lock's test seam to report the queueing, not for
   * a sleep. Returns the order the fence's lock then ran its callers in.
   */
  async function observedWhileQueued(t: TestNode, write: AuthorizedAction, resources: ObserveRequest['resources']) {
    const key = fenceLockKey(t.root);
    const ran: string[] = [];
    const queued = new Map<string, () => void>();
    const queues = (label: string) => new Promise<void>((resolve) => queued.set(label, resolve));
    probeLocksForTests((e) => {
      if (e.key !== key) return;
      if (e.phase === 'running') ran.push(e.label);
      else queued.get(e.label)?.();
    });
    try {
      let release!: () => void;
      const holding = withLock(key, () => new Promise<void>((resolve) => (release = resolve)), 'held by the test');
      const accepting = queues('accept 12');
      const applying = t.apply(write);
      // Judged by the caller; it may settle while the observe is still answered.
      applying.catch(() => undefined);
      const ended = (step: string) => applying.then(() => Promise.reject(new Error(`the apply ended before ${step}`)));
      await Promise.race([accepting, ended('it queued to be accepted')]);
      const advancing = queues('advance 13');
      const observing = observeAt(t, 13, resources);
      await advancing;
      release();
      await holding;
      const seen = await observing;
      await applying.catch(() => undefined);
      return { applying, seen, ran };
    } finally {
      probeLocksForTests(null);
    }
  }

  const serviceResources = (art: { file: string; sha256: string }): Record<string, ResourceSpec> => ({
    build: { type: 'release', version: '7.3', artifact: art.file, sha256: art.sha256 },
    config,
    app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
  });
  const rows: {
    name: string;
    key: string;
    setUp: (t: TestNode) => Promise<{ write: AuthorizedAction; resources: ObserveRequest['resources'] }>;
    untouched: (t: TestNode) => Promise<void>;
  }[] = [
    {
      name: 'a file write: no rename, no backup',
      key: 'config',
      setUp: async (t) => {
        await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
        await fs.writeFile(path.join(t.root, CONFIG_PATH), fileBytes({ workers: 2 }));
        return { write: fileAction(t.node, 'config', CONFIG_PATH, { workers: 9 }), resources: { config } };
      },
      untouched: async (t) => {
        expect(await read(t, CONFIG_PATH)).toBe(fileBytes({ workers: 2 }));
        expect(await fs.readdir(path.join(t.root, 'etc/app'))).toEqual(['config.json']);
        expect(await fs.readdir(path.join(t.root, '.datum/backup')).catch(() => [])).toEqual([]);
      },
    },
    {
      name: 'a flag write',
      key: 'maintenance',
      setUp: (t) =>
        Promise.resolve({
          write: action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: true }),
          resources: { maintenance: { type: 'flag', value: false } },
        }),
      untouched: async (t) => {
        await expect(fs.stat(path.join(t.root, 'flags/maintenance.json'))).rejects.toThrow(/ENOENT/);
      },
    },
    {
      name: 'a service start: nothing spawned',
      key: 'app',
      setUp: async (t) => {
        const a73 = await buildArtifact({ version: '7.3', outDir: path.join(t.base, 'artifacts') });
        await t.apply(releaseAction(t, '7.3', { artifact: a73.file, sha256: a73.sha256 }));
        await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 4 }));
        const resources = serviceResources(a73);
        const expected = desiredValue('app', resources) as { build: string; config_sha256: string };
        const spec = {
          command: ['node', 'server.js'],
          build: expected.build,
          config_path: CONFIG_PATH,
          config_sha256: expected.config_sha256,
        };
        return { write: action(t.node, 'app', 'service.start', spec), resources };
      },
      untouched: async (t) => {
        await expect(fs.stat(path.join(t.root, '.datum/services/app.json'))).rejects.toThrow(/ENOENT/);
      },
    },
  ];

  it.each(rows)(
    '$name of an older generation, held up until a newer one observed, is refused at the write',
    async (row) => {
      const t = await makeNode();
      const { write, resources } = await row.setUp(t);
      const { applying, seen, ran } = await observedWhileQueued(t, write, resources);
      // The interleaving named: 12 accepted, then 13's observe moved the fence, then 12 reached its write.
      expect(ran.slice(0, 4)).toEqual(['held by the test', 'accept 12', 'advance 13', 'write 12']);
      const failure = await expectRefusal(applying, 'StaleGenerationRefusal');
      expect(failure.message).toContain(OBSERVED_13);
      await row.untouched(t);
      expect(await pending(t)).toEqual([]);
      // The snapshot generation 13 plans from is still what the node holds.
      expect((await t.observe(resources)).resources[row.key].marker).toBe(seen.resources[row.key].marker);
    },
    60_000,
  );
});

describe("Datum's own last write, by target", () => {
  const TARGET = `file:${CONFIG_PATH}`;
  /** The bytes an earlier write left, and the marker observe reads off them. */
  async function landed(t: TestNode, content: Record<string, number>): Promise<string> {
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.writeFile(path.join(t.root, CONFIG_PATH), fileBytes(content));
    return fileMarker(await fs.stat(path.join(t.root, CONFIG_PATH)));
  }
  /** fence.json as the release before this one wrote it: Datum's own writes by resource key. */
  async function previousRelease(t: TestNode, written: Record<string, string>, claims?: Record<string, string>) {
    await fs.mkdir(path.join(t.root, '.datum'), { recursive: true });
    const acceptance = { generation: 13, accepted_at: ago(60_000), idempotency_key: 'k' };
    const byKey = Object.fromEntries(
      Object.entries(written).map(([k, marker]) => [k, { marker, generation: 13, at: ago(60_000) }]),
    );
    await fs.writeFile(
      path.join(t.root, '.datum/fence.json'),
      JSON.stringify({ node: { ...acceptance, resource_key: 'settings' }, resources: {}, written: byKey }),
    );
    if (!claims) return;
    const keys = Object.fromEntries(Object.entries(claims).map(([k, target]) => [k, { target, generation: 13 }]));
    await fs.writeFile(path.join(t.root, '.datum/claims.json'), JSON.stringify({ targets: {}, keys, bindings: {} }));
  }

  it("a write under the old key of a renamed resource is Datum's own: the plan is out of date, not MARKER_MOVED", async () => {
    const t = await makeNode();
    // Generation 13 still calls the file "settings"; 14 calls it "config" (same path), and both
    // planned from the same snapshot (the file absent). 13's write lands first.
    const g13 = fileAction(
      t.node,
      'settings',
      CONFIG_PATH,
      { workers: 9 },
      { desired_generation: 13, observed_marker: 'absent' },
    );
    const g14 = fileAction(t.node, 'config', CONFIG_PATH, { workers: 10 }, { desired_generation: 14, observed_marker: 'absent' });
    const wrote = await t.apply(g13);
    const failure = await expectRefusal(t.apply(g14), 'StaleSnapshotRefusal');
    expect(failure.message).toContain(`by Datum's own write for generation 13 under the key "settings"`);
    expect(failure.details?.[0]).toMatchObject({ written_by_key: 'settings', current_marker: wrote.marker_after });
    expect(await read(t, CONFIG_PATH)).toContain('"workers": 9');
  });

  it('a fence.json of the previous release (by key) is migrated through the claims record: no false MARKER_MOVED after an upgrade', async () => {
    const t = await makeNode();
    const marker = await landed(t, { workers: 9 });
    await previousRelease(t, { settings: marker }, { settings: TARGET });
    const g14 = fileAction(t.node, 'config', CONFIG_PATH, { workers: 10 }, { desired_generation: 14, observed_marker: 'absent' });
    const failure = await expectRefusal(t.apply(g14), 'StaleSnapshotRefusal');
    expect(failure.message).toContain(`by Datum's own write for generation 13 under the key "settings"`);
    // Stored in the new form at the first write of the fence (the apply accepted 14).
    const fence = JSON.parse(await read(t, '.datum/fence.json')) as Record<string, unknown>;
    expect(fence.written).toBeUndefined();
    expect(fence.written_targets).toEqual({
      [TARGET]: { marker, generation: 13, at: expect.any(String) as unknown, resource_key: 'settings' },
    });
  });

  it('keeps a by-key record for a key the claims record does not know, and still tells its own write from another writer’s', async () => {
    const t = await makeNode();
    const marker = await landed(t, { workers: 9 });
    await previousRelease(t, { config: marker });
    const g14 = fileAction(t.node, 'config', CONFIG_PATH, { workers: 10 }, { desired_generation: 14, observed_marker: 'absent' });
    await expectRefusal(t.apply(g14), 'StaleSnapshotRefusal');
    const fence = JSON.parse(await read(t, '.datum/fence.json')) as Record<string, unknown>;
    expect(fence.written_keys).toEqual({ config: { marker, generation: 13, at: expect.any(String) as unknown } });
    // Another writer moves it again: that is not Datum's, under any record.
    await sleep(20);
    await landed(t, { workers: 3 });
    await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 10 }, { desired_generation: 14, observed_marker: marker })),
      'MarkerMoved',
    );
  });
});

describe('an earlier attempt that wrote and died before journalling it (kill -9 between write and record)', () => {
  async function crashedAttempt(t: TestNode, landedContent: string) {
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.writeFile(path.join(t.root, CONFIG_PATH), '{"workers": 2}\n');
    const planned = (await t.observe({ config })).resources.config.marker;
    const a = fileAction(t.node, 'config', CONFIG_PATH, { workers: 8 }, { observed_marker: planned });
    // What the first attempt left: its intent, and (maybe) its bytes; no journal entry.
    await new AgentJournal(await fs.realpath(t.root)).intend(a, new Date());
    await sleep(20);
    await fs.writeFile(path.join(t.root, CONFIG_PATH), landedContent);
    return a;
  }

  it('is recorded on retry when its write is what is there: applied, not MARKER_MOVED, not done twice', async () => {
    const t = await makeNode();
    const ours = fileBytes({ workers: 8 });
    const a = await crashedAttempt(t, ours);
    const before = await fs.stat(path.join(t.root, CONFIG_PATH));
    const retry = await t.apply(a);
    expect(retry.outcome).toBe('applied');
    expect(retry.detail).toContain('an earlier attempt of this action wrote it and ended before recording it');
    expect(retry.marker_after).toBe((await t.observe({ config })).resources.config.marker);
    expect((await fs.stat(path.join(t.root, CONFIG_PATH))).mtimeMs).toBe(before.mtimeMs);
    expect(await fs.readdir(path.join(t.root, '.datum/backup')).catch(() => [])).toEqual([]);
    expect(await fs.readdir(path.join(t.root, '.datum/pending'))).toEqual([]);
    expect((await t.apply(a)).outcome).toBe('replayed');
  });

  it("is still MARKER_MOVED when what is there is someone else's", async () => {
    const t = await makeNode();
    const a = await crashedAttempt(t, '{"workers": 3}\n');
    await expectRefusal(t.apply(a), 'MarkerMoved');
    expect(await read(t, CONFIG_PATH)).toBe('{"workers": 3}\n');
  });
});

describe('a replay', () => {
  it('is answered from the journal though its snapshot has expired and its own write moved the marker', async () => {
    const t = await makeNode();
    const a = fileAction(t.node, 'config', CONFIG_PATH, { workers: 8 }, { observed_marker: 'absent', observation_ttl: '1s' });
    const first = await t.apply(a);
    expect(first.outcome).toBe('applied');
    await sleep(1_100);
    expect(await t.apply(a)).toEqual({ ...first, outcome: 'replayed' });
  });
});

describe('a stale snapshot', () => {
  it('is refused when now - observed_at exceeds observation_ttl, and nothing is written', async () => {
    const t = await makeNode();
    const observedAt = ago(11 * 60_000);
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 8 }, { observed_at: observedAt, observation_ttl: '10m' })),
      'StaleSnapshotRefusal',
    );
    expect(failure.message).toMatch(
      new RegExp(
        `the snapshot it was planned from \\(observed_at ${observedAt}\\) is 66\\ds old at the moment of the write, past observation_ttl 10m`,
      ),
    );
    expect(failure.message).toContain('fix: nothing to do by hand: the loop takes a fresh snapshot and plans again');
    expect(failure.details?.[0]).toMatchObject({ observed_at: observedAt, observation_ttl: '10m' });
    await expect(fs.stat(path.join(t.root, CONFIG_PATH))).rejects.toThrow(/ENOENT/);
  });

  it('includes a snapshot of unknown age: an action without observed_at is refused, naming what is missing', async () => {
    const t = await makeNode();
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 8 }, { observed_at: undefined })),
      'StaleSnapshotRefusal',
    );
    expect(failure.message).toContain('it carries no observed_at, so the age of the snapshot it was planned from is unknown');
    expect(failure.message).toContain('fix: upgrade the controller so its actions carry observed_at and observation_ttl');
  });

  it('refuses an observed_at or observation_ttl that does not read, as InvalidAction with the fix', async () => {
    const t = await makeNode();
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 8 }, { observation_ttl: 'soon' })),
      'InvalidAction',
    );
    expect(failure.message).toContain('observation_ttl "soon" does not read as a time and a duration');
    expect(failure.message).toContain('fix: re-plan from the desired state');
  });
});

describe('compare-and-swap on the marker', () => {
  it("refuses MARKER_MOVED when another writer changed the file after the snapshot, and the other writer's bytes stay", async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'etc/app'), { recursive: true });
    await fs.writeFile(path.join(t.root, CONFIG_PATH), '{"workers": 2}\n');
    const planned = (await t.observe({ config })).resources.config.marker;
    // The other writer, between the plan and the write.
    await sleep(20);
    await fs.writeFile(path.join(t.root, CONFIG_PATH), '{"workers": 3, "by": "tuning daemon"}\n');
    const current = (await t.observe({ config })).resources.config.marker;
    expect(current).not.toBe(planned);

    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 4 }, { observed_marker: planned })),
      'MarkerMoved',
    );
    expect(failure.message).toContain(
      `MARKER_MOVED: "config" changed after the snapshot the plan was made from (planned marker ${planned}, now ${current})`,
    );
    expect(failure.message).toContain(
      'fix: Datum reports a conflicting writer; an operator decides with datum resolve N-24 --resource config',
    );
    expect(failure.details?.[0]).toMatchObject({ planned_marker: planned, current_marker: current });
    expect(await read(t, CONFIG_PATH)).toBe('{"workers": 3, "by": "tuning daemon"}\n');
    expect(await fs.readdir(path.join(t.root, '.datum/backup')).catch(() => [])).toEqual([]);
  });

  it('refuses MARKER_MOVED when something appeared where the plan saw nothing', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'flags'));
    await fs.writeFile(path.join(t.root, 'flags/maintenance.json'), 'true\n');
    await expectRefusal(
      t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: false }, { observed_marker: 'absent' })),
      'MarkerMoved',
    );
    expect(await read(t, 'flags/maintenance.json')).toBe('true\n');
  });

  it('re-checks a release right before switching current, after a slow fetch', async () => {
    const t = await makeNode();
    const out = path.join(t.base, 'artifacts');
    const a73 = await buildArtifact({ version: '7.3', outDir: out });
    const a74 = await buildArtifact({ version: '7.4', outDir: out });
    await t.apply(releaseAction(t, '7.3', { artifact: a73.file, sha256: a73.sha256 }));
    const planned = (await t.observe({ build: { type: 'release', version: '7.4', artifact: a74.file, sha256: a74.sha256 } }))
      .resources.build.marker;

    // The artifact is served slowly; meanwhile another writer points current somewhere else.
    const bytes = await fs.readFile(a74.file);
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/gzip' });
      res.write(bytes.subarray(0, 10));
      setTimeout(() => res.end(bytes.subarray(10)), 1_500);
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/app-7.4.tgz`;
      const applying = t.apply(releaseAction(t, '7.4', { artifact: url, sha256: a74.sha256 }, { observed_marker: planned }));
      await sleep(500);
      await fs.mkdir(path.join(t.root, 'hand'));
      await fs.symlink('hand', path.join(t.root, 'current.new'));
      await fs.rename(path.join(t.root, 'current.new'), path.join(t.root, 'current'));
      await expectRefusal(applying, 'MarkerMoved');
    } finally {
      server.close();
    }
    expect(await fs.readlink(path.join(t.root, 'current'))).toBe('hand');
  });

  it("holds on the action's own target: a service restart after its release switched current goes ahead", async () => {
    const t = await makeNode();
    const out = path.join(t.base, 'artifacts');
    const a73 = await buildArtifact({ version: '7.3', outDir: out });
    const a74 = await buildArtifact({ version: '7.4', outDir: out });
    const resources = (art: { file: string; sha256: string }, version: string): Record<string, ResourceSpec> => ({
      build: { type: 'release', version, artifact: art.file, sha256: art.sha256 },
      config,
      app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
    });
    const serviceSpec = (res: Record<string, ResourceSpec>) => {
      const expected = desiredValue('app', res) as { build: string; config_sha256: string };
      return {
        command: ['node', 'server.js'],
        build: expected.build,
        config_path: CONFIG_PATH,
        config_sha256: expected.config_sha256,
      };
    };
    // Running on 7.3.
    const r73 = resources(a73, '7.3');
    await t.apply(releaseAction(t, '7.3', { artifact: a73.file, sha256: a73.sha256 }));
    await t.apply(fileAction(t.node, 'config', CONFIG_PATH, { workers: 4 }));
    expect((await t.apply(action(t.node, 'app', 'service.start', serviceSpec(r73)))).outcome).toBe('applied');

    // One plan for 7.4 from one snapshot: release, then the restart, each with its own marker.
    const r74 = resources(a74, '7.4');
    const snap = await t.observe(r74);
    const install = await t.apply(
      releaseAction(t, '7.4', { artifact: a74.file, sha256: a74.sha256 }, { observed_marker: snap.resources.build.marker }),
    );
    expect(install.marker_after).not.toBe(snap.resources.build.marker);
    const restart = await t.apply(
      action(t.node, 'app', 'service.restart', serviceSpec(r74), { observed_marker: snap.resources.app.marker }),
    );
    expect(restart.outcome).toBe('applied');
    expect((await t.observe(r74)).resources.app.value).toEqual(desiredValue('app', r74));
  }, 60_000);
});
