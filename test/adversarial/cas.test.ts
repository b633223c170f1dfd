// Hole 3: freshness, intent and the observed value were checked once per pass, so a batch that
// ran for minutes wrote from what it saw at its start. Each test is an attack on the real stack
// (dev server, controller worker, agent, files on disk): a release artifact served slowly holds
// the batch open, and meanwhile a second writer changes a managed file, or the authority moves
// on to a newer generation whose loop reaches the node first.

import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { LedgerEntry } from '../../src/domain';
import { type Stack, useStack } from '../helpers/stack';
import { until } from '../helpers/until';

const stack = useStack();

const CONFIG = 'etc/app/config.json';

/**
 * Serves the 7.4 artifact slowly: the first bytes at once, `during` while the agent is fetching
 * (so after the plan and before the batch's later writes), the rest after `holdMs`.
 */
async function slowArtifact(
  holdMs: number,
  during: () => Promise<void>,
): Promise<{ url: string; sha256: string; close: () => void }> {
  const art = await stack.fleet.artifact('7.4');
  const bytes = await fs.readFile(path.join(stack.fleet.dir, 'artifacts', art.name));
  let fired = false;
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/gzip' });
    res.write(bytes.subarray(0, 16));
    const first = !fired;
    fired = true;
    void (first ? during() : Promise.resolve()).then(() => setTimeout(() => res.end(bytes.subarray(16)), holdMs));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/${art.name}`;
  return { url, sha256: art.sha256, close: () => server.close() };
}

const evidenceOf = (ledger: LedgerEntry[], key: string) =>
  ledger.flatMap((e) => e.execution_evidence.filter((ev) => ev.resource_key === key).map((ev) => ({ entry: e, ev })));

describe('attack: a second writer changes a managed file between the plan and the apply', () => {
  it('is refused as MARKER_MOVED, the loop goes CONFLICT with the evidence, and the other writer’s content stays on disk', async () => {
    const node = 'CAS-1';
    const root = stack.fleet.root(node);
    await fs.mkdir(path.join(root, 'etc/app'), { recursive: true });
    await fs.writeFile(path.join(root, CONFIG), '{"workers": 2}\n');
    const theirs = '{"workers": 3, "tuned_by": "tuning daemon"}\n';
    const server = await slowArtifact(2_000, async () => {
      await fs.writeFile(path.join(root, CONFIG), theirs);
    });
    try {
      await stack.fleet.writeDesired(node, 1, {
        extra: { build: { type: 'release', version: '7.4', artifact: server.url, sha256: server.sha256 } },
      });
      await stack.fleet.writeAgent(node);
      await stack.startAgent(node);
      const handle = await stack.startNode(node, 1);

      await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT', 90_000);
      const ledger = await stack.ledger(handle);
      const [moved] = evidenceOf(ledger, 'config').filter(({ ev }) => ev.outcome === 'refused');
      expect(moved?.ev).toMatchObject({ refusal_type: 'MarkerMoved', marker_after: null });
      expect(moved?.ev.detail).toContain('MARKER_MOVED: "config" changed after the snapshot the plan was made from');
      // The batch went on until then: the release was switched before, the service not started after.
      expect(evidenceOf([moved.entry], 'build').map(({ ev }) => ev.outcome)).toEqual(['applied']);
      expect(evidenceOf([moved.entry], 'app').map(({ ev }) => ev.outcome)).toEqual(['skipped']);

      const entry = moved.entry;
      expect([entry.convergence_status, entry.reason]).toEqual(['CONFLICT', 'CONFLICTING_WRITER']);
      const planned = entry.authorized_actions.find((a) => a.resource_key === 'config');
      const st = await fs.stat(path.join(root, CONFIG));
      const sequence = entry.conflicting_writer_evidence?.find((c) => c.resource_key === 'config')?.sequence ?? [];
      const theirsMarker = `file:${st.mtimeMs}:${st.ino}:${st.size}:${st.ctimeMs}:${createHash('sha256').update(theirs).digest('hex').slice(0, 16)}`;
      expect(sequence.map((p) => p.marker)).toEqual([planned?.observed_marker, theirsMarker]);
      expect(sequence[0].marker).not.toBe(sequence[1].marker);
      expect(sequence[0].at).toBe(planned?.observed_at);
      expect(entry.conditions.map((c) => [c.type, c.resource_key])).toContainEqual(['CONFLICTING_WRITER', 'config']);

      // No lost update: the other writer's bytes, now and after more passes (repair stays stopped).
      expect(await fs.readFile(path.join(root, CONFIG), 'utf8')).toBe(theirs);
      await stack.waitForPass(handle, Date.now(), 2);
      expect(await fs.readFile(path.join(root, CONFIG), 'utf8')).toBe(theirs);
      expect((await stack.state(handle)).convergence_status).toBe('CONFLICT');
      await handle.terminate('test done');
    } finally {
      server.close();
    }
  }, 150_000);
});

describe('attack: a superseded generation acts late, after a newer one reached the node', () => {
  it('the older generation’s queued write is fenced per node (another resource than the newer one touched first), and the newer one converges', async () => {
    const node = 'CAS-2';
    let newer: Awaited<ReturnType<Stack['startNode']>> | undefined;
    // While generation 1 fetches its release, the authority moves to generation 2 and its loop
    // starts: it observes the node (current still absent) and sends its own install, which waits
    // behind generation 1's on the agent. Only then does generation 1's fetch finish.
    const server = await slowArtifact(300, async () => {
      await stack.fleet.writeDesired(node, 2, {
        workers: 9,
        extra: { build: { type: 'release', version: '7.4', artifact: server.url, sha256: server.sha256 } },
      });
      newer = await stack.startNode(node, 2);
      await until(async () => ((await stack.historyCounts(newer!)).scheduled.apply ?? 0) > 0, {
        what: 'generation 2 to send its install',
      });
    });
    try {
      await stack.fleet.writeDesired(node, 1, {
        extra: { build: { type: 'release', version: '7.4', artifact: server.url, sha256: server.sha256 } },
      });
      await stack.fleet.writeAgent(node);
      await stack.startAgent(node);
      const older = await stack.startNode(node, 1);

      await stack.waitFor(older, (_s, ledger) => evidenceOf(ledger, 'config').length > 0, 90_000);
      // Generation 1's install passed the fence before generation 2 observed, and is refused at
      // its switch of current; the rest of its batch is not sent.
      const [late] = evidenceOf(await stack.ledger(older), 'build');
      expect(late?.ev).toMatchObject({ outcome: 'refused', refusal_type: 'StaleGenerationRefusal' });
      expect(late?.ev.detail).toContain(
        'it is for generation 1, but this agent already accepted generation 2 for node CAS-2 (when its workflow observed the node)',
      );
      expect(evidenceOf([late.entry], 'config').map(({ ev }) => ev.outcome)).toEqual(['skipped']);

      expect(newer).toBeDefined();
      await stack.waitFor(newer!, (s) => s.convergence_status === 'CONVERGED', 90_000);
      // Generation 1's content was never written; generation 2's is on disk.
      expect(JSON.parse(await fs.readFile(path.join(stack.fleet.root(node), CONFIG), 'utf8'))).toEqual({ workers: 9 });
      const fence = JSON.parse(await fs.readFile(path.join(stack.fleet.root(node), '.datum/fence.json'), 'utf8')) as {
        node: { generation: number };
      };
      expect(fence.node.generation).toBe(2);
      // Generation 2's own install found current where its plan saw it, and switched it, reusing
      // the release generation 1 had fetched and unpacked; never a conflict.
      const newerLedger = await stack.ledger(newer!);
      const [install] = evidenceOf(newerLedger, 'build');
      expect(install?.ev).toMatchObject({ outcome: 'applied' });
      expect(install?.ev.detail).toContain('reused releases/7.4');
      expect(await fs.readlink(path.join(stack.fleet.root(node), 'current'))).toBe('releases/7.4');
      expect(newerLedger.map((e) => e.convergence_status)).not.toContain('CONFLICT');
      await Promise.all([older.terminate('test done'), newer!.terminate('test done')]);
    } finally {
      server.close();
    }
  }, 180_000);
});

describe('attack: a batch that outlives its snapshot (a release fetched for longer than observation_ttl)', () => {
  it('the write after the fetch is refused as a stale snapshot, which is no standing refusal: the loop re-observes soon and converges', async () => {
    const node = 'CAS-3';
    const server = await slowArtifact(5_000, () => Promise.resolve());
    try {
      await stack.fleet.writeDesired(node, 1, {
        policy: { observation_ttl: '3s' },
        extra: { build: { type: 'release', version: '7.4', artifact: server.url, sha256: server.sha256 } },
      });
      await stack.fleet.writeAgent(node);
      await stack.startAgent(node);
      const handle = await stack.startNode(node, 1);

      await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED', 90_000);
      const ledger = await stack.ledger(handle);
      const [stale] = evidenceOf(ledger, 'build').filter(({ ev }) => ev.outcome === 'refused');
      expect(stale?.ev).toMatchObject({ refusal_type: 'StaleSnapshotRefusal' });
      expect(stale?.ev.detail).toMatch(/old at the moment of the write, past observation_ttl 3s/);
      // Rung 3: BLOCKED / STALE_OBSERVATION, a fresh snapshot soon (not a standing ACTION_REFUSED).
      expect([stale.entry.convergence_status, stale.entry.reason, stale.entry.recheck_trigger.trigger]).toEqual([
        'BLOCKED',
        'STALE_OBSERVATION',
        'FRESH_OBSERVATION',
      ]);
      expect(stale.entry.conditions.map((c) => c.type)).not.toContain('ACTION_REFUSED');
      // Nothing stale was switched, and the next pass re-planned and repaired from a fresh snapshot.
      const after = ledger.slice(ledger.indexOf(stale.entry) + 1);
      expect(evidenceOf(after, 'build').map(({ ev }) => ev.outcome)).toContain('applied');
      expect(await fs.readlink(path.join(stack.fleet.root(node), 'current'))).toBe('releases/7.4');
      await handle.terminate('test done');
    } finally {
      server.close();
    }
  }, 150_000);
});
