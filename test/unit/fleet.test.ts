import { describe, expect, it } from 'vitest';
import {
  fleetConditions,
  fleetWatched,
  fleetWork,
  fleetWorkWaiting,
  mergeFleetConditions,
  type DeclaredNode,
  type LoopSeen,
} from '../../src/domain';
import type { FleetView, MissingLoop } from '../../src/contract';

/*
 * The fleet's conditions as pure functions of one look (src/domain/fleet.ts): which nodes have
 * no loop, which loops are silent past their bound, and since when each condition holds.
 */

const NOW = '2026-12-05T12:00:00.000Z';
const at = (minutesAgo: number) => new Date(Date.parse(NOW) - minutesAgo * 60_000).toISOString();
const POLICY: DeclaredNode['policy'] = {
  resync_interval: '30s',
  node_timeout: '30s',
  observation_ttl: '60s',
  backoff: { initial: '5s', factor: 2, max: '5m' },
};
const declared = (node: string): DeclaredNode => ({ node, generation: 1, digest: 'sha256:x', policy: POLICY });
const loop = (node: string, verifiedMinutesAgo: number | null): LoopSeen => ({
  node,
  workflow_id: `datum/${node}/gen-1`,
  generation: 1,
  status: 'CONVERGED',
  reason: 'ALREADY_CONVERGED',
  last_verified_at: verifiedMinutesAgo === null ? null : at(verifiedMinutesAgo),
  since: at(60),
});
const ended = (node: string, closedMinutesAgo: number): MissingLoop => ({
  node,
  end: 'TERMINATED',
  last_loop: {
    workflow_id: `datum/${node}/gen-1`,
    run_id: 'r',
    generation: 1,
    started_at: at(90),
    closed_at: at(closedMinutesAgo),
    how: 'terminated by ops: "oops"',
  },
});
const look = (loops: LoopSeen[], missing: MissingLoop[], nodes = ['A', 'B', 'C']) =>
  fleetConditions({ declared: nodes.map(declared), loops, missing, now: NOW, memo_lag_ms: 5 * 60_000 });

describe('the fleet look', () => {
  it('a loop silent past resync/backoff max + node_timeout + observation_ttl + the memo lag is VERIFICATION_OVERDUE; one within is verified', () => {
    // Bound: max(30s, 5m) + 30s + 60s + 5m = 11m30s.
    const { drafts, counts } = look([loop('A', 11), loop('B', 12)], [ended('C', 3)]);
    expect(drafts.map((d) => `${d.node}:${d.type}`)).toEqual(['B:VERIFICATION_OVERDUE', 'C:NO_RUNNING_LOOP']);
    expect(drafts[0].message).toMatch(
      /has not verified B since .* past its bound of 690s; its last decision was CONVERGED\/ALREADY_CONVERGED — fix: /,
    );
    expect(counts).toEqual({ declared: 3, running: 2, verified: 1, loops: 2 });
  });

  it('a loop on a shard queue no controller polls is LOOP_QUEUE_UNSERVED at once, before its verification is overdue', () => {
    const onShard = (node: string, shard: number): LoopSeen => ({ ...loop(node, 1), task_queue: `datum-control-loops-${shard}` });
    const { drafts, counts } = fleetConditions({
      declared: ['A', 'B', 'C'].map(declared),
      loops: [onShard('A', 0), onShard('B', 1), { ...loop('Z', 1), task_queue: 'datum-control-loops-1' }],
      missing: [{ node: 'C', end: 'NEVER_STARTED', last_loop: null }],
      now: NOW,
      memo_lag_ms: 5 * 60_000,
      unserved_shards: [{ queue: 'datum-control-loops-1', shard: 1, base: 'datum-control', fleet_queue: true }],
    });
    // B's shard has no poller; A's has. Z is undeclared: that is its condition, not its queue.
    expect(drafts.map((d) => `${d.node}:${d.type}`)).toEqual([
      'B:LOOP_QUEUE_UNSERVED',
      'C:NO_RUNNING_LOOP',
      'Z:NO_DESIRED_STATE',
    ]);
    const b = drafts[0];
    expect(b.message).toBe(
      "no controller worker polls datum-control-loops-1, where datum/B/gen-1 runs: its next pass waits until one does — fix: start a controller worker that serves shard 1: `datum worker --loop-shards N --serve-shards 1` with the fleet's shard count N, or without --serve-shards to serve every shard; `temporal task-queue describe --task-queue datum-control-loops-1` lists the queue's pollers",
    );
    expect([b.resolver, b.needs_judgement, b.evidence]).toEqual([
      'operator',
      false,
      { workflow_id: 'datum/B/gen-1', task_queue: 'datum-control-loops-1' },
    ]);
    // Verified a minute ago: still counted as verified, as it is.
    expect(counts).toEqual({ declared: 3, running: 2, verified: 2, loops: 3 });
  });

  it("names a separate controller's queue in the fix of its unserved shard", () => {
    const { drafts } = fleetConditions({
      declared: [declared('A')],
      loops: [{ ...loop('A', 1), task_queue: 'datum-staging-loops-0' }],
      missing: [],
      now: NOW,
      memo_lag_ms: 5 * 60_000,
      unserved_shards: [{ queue: 'datum-staging-loops-0', shard: 0, base: 'datum-staging', fleet_queue: false }],
    });
    expect(drafts.map((d) => d.type)).toEqual(['LOOP_QUEUE_UNSERVED']);
    expect(drafts[0].message).toContain('`datum worker --task-queue datum-staging --loop-shards N --serve-shards 0`');
  });

  it('a loop for a node the authority no longer declares is NO_DESIRED_STATE', () => {
    const { drafts } = look([loop('A', 1), loop('Z', 1)], [], ['A']);
    expect(drafts.map((d) => `${d.node}:${d.type}:${d.needs_judgement}`)).toEqual(['Z:NO_DESIRED_STATE:true']);
  });

  it("keeps a condition's since across looks, and moves it when a later episode began between two looks", () => {
    const first = mergeFleetConditions(
      [],
      look([loop('A', 1), loop('B', 1)], [{ node: 'C', end: 'NEVER_STARTED', last_loop: null }]).drafts,
      at(10),
    );
    expect(first.map((c) => [c.node, c.since])).toEqual([['C', at(10)]]);
    // Same evidence at the next look: since stays.
    const again = mergeFleetConditions(
      first,
      look([loop('A', 1), loop('B', 1)], [{ node: 'C', end: 'NEVER_STARTED', last_loop: null }]).drafts,
      at(9),
    );
    expect(again[0].since).toBe(at(10));
    // C had a loop in between, terminated 3 minutes ago: the node has been without a loop since then.
    const later = mergeFleetConditions(again, look([loop('A', 1), loop('B', 1)], [ended('C', 3)]).drafts, NOW);
    expect(later[0].since).toBe(at(3));
    // A condition no look finds any more is closed.
    expect(mergeFleetConditions(later, look([loop('A', 1), loop('B', 1), loop('C', 0)], []).drafts, NOW)).toEqual([]);
  });

  it('a condition becomes a work item only once it has stood a whole interval: a node declared just before its rollout asks no one', () => {
    const never: MissingLoop = { node: 'B', end: 'NEVER_STARTED', last_loop: null };
    const viewAt = (conditions: FleetView['conditions'], lookedAt: string): FleetView => ({
      workflow_id: 'datum-fleet',
      task_queue: 'datum-control',
      interval: '60s',
      looked_at: lookedAt,
      looks: 1,
      counts: null,
      authority: null,
      conditions,
      decisions: {},
    });
    const opened = (w: ReturnType<typeof fleetWork>) => w.reports.flatMap((r) => r.open.map((o) => o.id));
    // First look: B was never rolled out (since: this look), C's loop was terminated 3 minutes ago.
    const first = mergeFleetConditions([], look([loop('A', 1)], [never, ended('C', 3)]).drafts, at(1));
    const w1 = fleetWork(viewAt(first, at(1)), []);
    expect(opened(w1)).toEqual(['datum-work/C/NO_RUNNING_LOOP']);
    expect(w1.known).toEqual(['datum-work/C/NO_RUNNING_LOOP']);
    expect(fleetWorkWaiting(viewAt(first, at(1)), w1.known)).toBe(true);
    // B rolled out before the next look: nobody was asked, and nothing waits.
    const rolled = mergeFleetConditions(first, look([loop('A', 1), loop('B', 0)], [ended('C', 3)]).drafts, NOW);
    expect(opened(fleetWork(viewAt(rolled, NOW), w1.known))).toEqual([]);
    expect(fleetWorkWaiting(viewAt(rolled, NOW), w1.known)).toBe(false);
    // B still without a loop a whole interval later: now it is work.
    const still = mergeFleetConditions(first, look([loop('A', 1)], [never, ended('C', 3)]).drafts, NOW);
    expect(opened(fleetWork(viewAt(still, NOW), w1.known))).toEqual(['datum-work/B/NO_RUNNING_LOOP']);
  });

  it('the fleet is watched while its last look is within the interval and its grace (half of it, at least 5 s)', () => {
    expect(fleetWatched(null, '60s', NOW)).toBe(false);
    expect(fleetWatched(at(1.5), '60s', NOW)).toBe(true);
    expect(fleetWatched(at(1.6), '60s', NOW)).toBe(false);
    expect(fleetWatched(new Date(Date.parse(NOW) - 6_500).toISOString(), '2s', NOW)).toBe(true);
    expect(fleetWatched(new Date(Date.parse(NOW) - 7_500).toISOString(), '2s', NOW)).toBe(false);
  });
});
