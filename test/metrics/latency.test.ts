import { describe, expect, it } from 'vitest';
import { LEDGER_VERSION, type Decision, type LedgerEntry, type Observation } from '../../src/domain';
import { ABSENT_MARKER, fileMarker, linkMarker, obstructionMarker, serviceMarker } from '../../src/agent/markers';
import { convergenceLatency, detectionLatencies, markerTimeMs } from '../../src/workflows/metrics';
import { D6, NOW, later, n24After, oursFor, pass, snapshot, type NodeState } from '../unit/fixtures';

/*
 * What datum_detection_latency_seconds and datum_convergence_latency_seconds measure, from
 * decisions the loop's real pass makes (src/domain/pass.ts over the seed's N-24): one row per
 * situation a loop meets. test/deploy/observability.test.ts shows the samples of a real pass.
 */

const ms = (iso: string) => Date.parse(iso);
const MTIME = ms(later(2_000)) + 0.25;
/** The config file as an out-of-band writer left it 2 s after NOW: D6 instead of D7, its mtime on the marker. */
const drifted = (): NodeState => ({
  ...n24After(),
  config: D6(),
  markers: { config: fileMarker({ mtimeMs: MTIME, ino: 7, size: 14, ctimeMs: MTIME }, 'ab'.repeat(32)) },
});

/** The node at desired (N-24 after the seed's rollout): ALREADY_CONVERGED. */
const converged = async (at = NOW) => (await pass(snapshot(n24After(), { at }), null)).final.decision;
/** A pass at `at` that finds `state`'s drift and repairs it: CONVERGED_AFTER_REPAIR, or RETRY when the probe still differs. */
const repairs = async (state: NodeState, at: string, takes = true) =>
  (
    await pass(
      snapshot(state, { at }),
      // A write that did not take leaves our marker on a value still off desired (ACTION_INEFFECTIVE).
      () => snapshot({ ...(takes ? n24After() : state), markers: oursFor(['config']) }, { at: later(500, at) }),
      { now: later(100, at) },
    )
  ).final.decision;
/** A pass whose observe found no agent (NODE_UNREACHABLE). */
const unreachable = async (at: string) => (await pass(null as unknown as Observation, null, { now: at })).final.decision;

function entry(decision: Decision, seq: number, decidedAt: string): LedgerEntry {
  return { ...decision, ledger_version: LEDGER_VERSION, seq, decided_at: decidedAt, workflow_id: 'datum/N-24/gen-12' };
}

describe('markerTimeMs reads the change time off the markers src/agent/markers.ts writes', () => {
  const rows: { name: string; marker: string | null; ms: number | null }[] = [
    {
      name: "a file's mtime (files, flags)",
      marker: fileMarker({ mtimeMs: 1764417600123.456, ino: 42, size: 9, ctimeMs: 1764417600200 }, 'cd'.repeat(32)),
      ms: 1764417600123.456,
    },
    { name: 'a file marker of an agent before ctime and digest', marker: 'file:1764417600123.456:42:9', ms: 1764417600123.456 },
    { name: "the release link's ctime", marker: linkMarker('releases/app-7.4', 1764417600500.5), ms: 1764417600500.5 },
    { name: 'a link whose target holds colons', marker: linkMarker('/srv/a:b:c', 1764417600600), ms: 1764417600600 },
    { name: 'a service (start ticks since boot are no time of day)', marker: serviceMarker(4242, '998877'), ms: null },
    { name: 'nothing there', marker: ABSENT_MARKER, ms: null },
    {
      name: 'something in the way of a link',
      marker: obstructionMarker('directory', { ctimeMs: 1764417600000, ino: 3 }),
      ms: null,
    },
    { name: 'no marker', marker: null, ms: null },
  ];
  for (const row of rows) it(row.name, () => expect(markerTimeMs(row.marker)).toBe(row.ms));
});

describe('detection latency: from the change on the node to the snapshot that showed it', () => {
  it('a node last seen CONVERGED: one sample per drifted resource, from its mtime to observed_at', async () => {
    const previous = await converged();
    const found = await repairs(drifted(), later(3_000));
    expect(found.convergence_status).toBe('CONVERGED');
    expect(detectionLatencies(found, previous)).toEqual([(ms(later(3_000)) - MTIME) / 1000]);
  });

  it('the first pass of a generation: no change on the node to measure (the intent is what changed)', async () => {
    expect(detectionLatencies(await repairs(drifted(), later(3_000)), null)).toEqual([]);
  });

  it('a node already off desired: the change was measured when it was first seen', async () => {
    const retry = await repairs(drifted(), later(3_000), false);
    expect(retry.convergence_status).toBe('RETRY');
    expect(detectionLatencies(await repairs(drifted(), later(6_000)), retry)).toEqual([]);
  });

  it('an mtime older than the last snapshot at desired (a writer preserved it): not the change, no sample', async () => {
    const previous = await converged(later(2_500));
    expect(detectionLatencies(await repairs(drifted(), later(3_000)), previous)).toEqual([]);
  });

  it('a change that leaves no time (a deleted file): no sample', async () => {
    const gone = { ...n24After(), config: null, markers: { config: ABSENT_MARKER } };
    const found = await repairs(gone, later(3_000));
    expect(found.planned_actions.map((a) => a.resource_key)).toContain('config');
    expect(detectionLatencies(found, await converged())).toEqual([]);
  });

  it('a steady pass: nothing drifted, nothing to measure', async () => {
    expect(detectionLatencies(await converged(later(3_000)), await converged())).toEqual([]);
  });
});

describe('convergence latency: from the generation start, or the drift, to CONVERGED', () => {
  const START = later(-60_000);

  it('the first CONVERGED of a generation counts from its start', async () => {
    const first = await repairs(drifted(), later(3_000));
    expect(convergenceLatency(first, later(3_600), { lastDecision: null, ledger: [] }, START)).toEqual({
      start: 'generation',
      seconds: 63.6,
    });
  });

  it('drift found and repaired in one pass counts from the snapshot that showed it', async () => {
    const previous = await converged();
    const loop = { lastDecision: previous, ledger: [entry(previous, 1, NOW)] };
    expect(convergenceLatency(await repairs(drifted(), later(3_000)), later(3_600), loop, START)).toEqual({
      start: 'drift',
      seconds: 0.6,
    });
  });

  it('drift that took passes (RETRY, then repaired) counts from the first snapshot that showed it', async () => {
    const previous = await converged();
    const retry = await repairs(drifted(), later(3_000), false);
    const loop = { lastDecision: retry, ledger: [entry(previous, 1, NOW), entry(retry, 2, later(3_600))] };
    expect(convergenceLatency(await repairs(drifted(), later(10_000)), later(10_600), loop, START)).toEqual({
      start: 'drift',
      seconds: 7.6,
    });
  });

  it('a steady pass of a CONVERGED node ends no episode', async () => {
    const previous = await converged();
    const loop = { lastDecision: previous, ledger: [entry(previous, 1, NOW)] };
    expect(convergenceLatency(await converged(later(1_000)), later(1_100), loop, START)).toBeNull();
  });

  it('an unreachable stretch that ends CONVERGED showed no drift: no episode', async () => {
    const previous = await converged();
    const away = await unreachable(later(1_000));
    expect(away.convergence_status).not.toBe('CONVERGED');
    const loop = { lastDecision: away, ledger: [entry(previous, 1, NOW), entry(away, 2, later(1_000))] };
    expect(convergenceLatency(await converged(later(5_000)), later(5_100), loop, START)).toBeNull();
  });

  it('a generation that never converged, with its first entries no longer kept: its start is unknown, no sample', async () => {
    const retry = await repairs(drifted(), later(3_000), false);
    const kept = { lastDecision: retry, ledger: [entry(retry, 1, later(3_600))] };
    const dropped = { lastDecision: retry, ledger: [entry(retry, 40, later(3_600))] };
    const done = await repairs(drifted(), later(10_000));
    expect(convergenceLatency(done, later(10_600), kept, START)?.start).toBe('generation');
    expect(convergenceLatency(done, later(10_600), dropped, START)).toBeNull();
  });

  it('a decision that is not CONVERGED ends nothing', async () => {
    const retry = await repairs(drifted(), later(3_000), false);
    expect(convergenceLatency(retry, later(3_600), { lastDecision: null, ledger: [] }, START)).toBeNull();
  });
});
