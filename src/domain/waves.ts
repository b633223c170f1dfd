import { withFix } from '../contract/fix';
import type { ConvergenceStatus, Reason } from '../contract/vocabulary';
import { ROLLOUT_SETTLED, type GateEntry, type GateNodeVerdict, type RolloutWaves, type WaveGate } from '../contract/workflows';
import { parseDuration } from './duration';
import { selects, type Labels, type Selector } from './selector';

/*
 * Waves (docs/operations.md, "A first production change, in waves"): which nodes each wave of a
 * rollout takes, how many of a wave change at once, and the gate between waves, judged only on
 * what the ledger records. Seed 000 keeps staging out of the reconcile lesson: the loops run as
 * they always do, and their evidence feeds this gate.
 */

/** How far a wave reaches: a number of nodes, or a share of the rollout's nodes, counted from the first wave. */
export type WaveSize = { count: number } | { percent: number };

/** One wave as a plan asks for it: by size, or by selector. */
export type WaveSpec = { name?: string; size: WaveSize } | { name?: string; selector: Selector };

export interface PlannedWave {
  name: string;
  nodes: string[];
}

const SIZE_FIX = 'write sizes like 1,10%,50%,100%: each a number of nodes or a share, counted from the first wave';

/** "1", "10%": a wave's size, or why not. */
export function parseWaveSize(text: string): WaveSize | string {
  const t = text.trim();
  const percent = /^(\d{1,3}(?:\.\d+)?)%$/.exec(t);
  if (percent) {
    const p = Number(percent[1]);
    return p > 0 && p <= 100 ? { percent: p } : `${JSON.stringify(text)} is not a share from 0% (excluded) to 100%`;
  }
  if (/^\d{1,7}$/.test(t) && Number(t) >= 1) return { count: Number(t) };
  return `${JSON.stringify(text)} is neither a number of nodes (1 or more) nor a share such as 10%`;
}

/** `--waves 1,10%,50%,100%`: the sizes, or why not. */
export function parseWaveSizes(text: string): { ok: true; sizes: WaveSize[] } | { ok: false; error: string } {
  const sizes: WaveSize[] = [];
  for (const part of text.split(',')) {
    const size = parseWaveSize(part);
    if (typeof size === 'string') return { ok: false, error: withFix(`--waves: ${size}`, SIZE_FIX) };
    sizes.push(size);
  }
  return { ok: true, sizes };
}

/** How many nodes, counted from the first wave, a size reaches among `total`. */
const reach = (size: WaveSize, total: number) =>
  Math.min(total, 'count' in size ? size.count : Math.ceil((size.percent * total) / 100));

/**
 * The rollout's nodes (in order) split into waves. A size reaches a count from the first wave
 * and always takes at least one more node than the waves before it; a selector takes the nodes
 * it selects that no earlier wave took. Every node ends in exactly one wave, or it is an error.
 */
export function planWaves(
  nodes: string[],
  specs: WaveSpec[],
  labelsOf: (node: string) => Labels,
): { ok: true; waves: PlannedWave[] } | { ok: false; error: string } {
  if (specs.length === 0) return { ok: false, error: withFix('a wave plan needs at least one wave', SIZE_FIX) };
  let pool = [...nodes];
  let taken = 0;
  const waves: PlannedWave[] = [];
  for (const [i, spec] of specs.entries()) {
    const name = spec.name ?? `wave-${i + 1}`;
    const picked =
      'size' in spec
        ? pool.slice(0, Math.max(reach(spec.size, nodes.length) - taken, pool.length > 0 ? 1 : 0))
        : pool.filter((n) => selects(spec.selector, n, labelsOf(n)));
    if (picked.length === 0) {
      const why = pool.length === 0 ? 'every node is in an earlier wave' : `it selects none of the ${pool.length} node(s) left`;
      return {
        ok: false,
        error: withFix(`${name} takes no node: ${why}`, 'remove the wave, or select nodes no earlier wave takes'),
      };
    }
    const chosen = new Set(picked);
    pool = pool.filter((n) => !chosen.has(n));
    taken += picked.length;
    waves.push({ name, nodes: picked });
  }
  if (pool.length > 0)
    return {
      ok: false,
      error: withFix(
        `${pool.length} node(s) are in no wave: ${pool.slice(0, 10).join(', ')}${pool.length > 10 ? ', …' : ''}`,
        'end the plan with a wave that takes the rest (100%, or selector "*")',
      ),
    };
  return { ok: true, waves };
}

/** `--max-unavailable 2` or `25%`: how many of a wave's nodes change at once (at least one). */
export function maxUnavailable(spec: string | null, waveSize: number): number {
  if (spec === null) return waveSize;
  const size = parseWaveSize(spec);
  if (typeof size === 'string') return 1;
  return Math.max(1, 'count' in size ? size.count : Math.floor((size.percent * waveSize) / 100));
}

// ---------------------------------------------------------------------------------------------
// What a rollout counts: a node settles when its loop waits for new evidence, not for itself.

/**
 * Stale snapshots in a row a rollout waits out before it counts a node BLOCKED/STALE_OBSERVATION
 * (patch rollout-waits-out-stale-retake). That decision is the loop's own retake, not an outcome:
 * the loop takes a fresh snapshot itself at its not_before. A controller that fell behind in a
 * fleet-wide rollout (bench, dev, 1000 nodes: 126 nodes ended the rollout so) has usually caught
 * up by then. A third in a row is a standing problem, such as a node whose clock runs ahead or an
 * observation_ttl no observation meets, and the rollout counts it.
 */
export const STALE_RETAKES_A_ROLLOUT_WAITS = 2;

/**
 * What settling is judged on: a loop's latest decision and when it looks again by itself (its
 * recheck's not_before), and its stale snapshots in a row (absent from older loops).
 */
interface SettlingState {
  status: ConvergenceStatus | null;
  reason: Reason | null;
  not_before?: string | null;
  stale_retakes?: number;
}

/** Whether a rollout waits out a loop's own early re-look: the workflow's patches, asked only where they decide. */
export interface RolloutWaits {
  /** rollout-waits-out-stale-retake */
  staleRetake: () => boolean;
  /** rollout-waits-out-reprobe */
  reprobe: () => boolean;
}

type Latest = { status: ConvergenceStatus | null; reason: Reason | null };

/** A decision refused on a stale snapshot, which the loop re-takes itself. */
const staleRetake = (s: Latest): boolean => s.status === 'BLOCKED' && s.reason === 'STALE_OBSERVATION';

/** A decision made without an answer from the node, which the loop may ask again itself. */
const unanswered = (s: Latest): boolean => s.status === 'BLOCKED' && s.reason === 'NODE_UNREACHABLE';

/**
 * Whether an unanswered pass is one the loop re-probes by itself, at a time it set
 * (UNANSWERED_REPROBES of them in a row, rule unreachable-reprobes-soon): a rollout waits it out,
 * as it does a stale snapshot, since an agent that was only late answers. A node still silent
 * after them waits for its resync, is gone for longer, and is counted; so is one whose loop ran
 * from before the rule (no time of its own).
 */
const reprobesItself = (s: { not_before?: string | null }): boolean => !!s.not_before;

/**
 * Whether the loop's latest decision is its own early re-look, which a rollout waits out when its
 * patch says so: a stale snapshot it re-takes, or an unanswered pass it re-probes.
 */
function looksAgainItself(s: SettlingState, waits: RolloutWaits): boolean {
  // A loop from before the count (no stale_retakes) is counted.
  if (staleRetake(s))
    return s.stale_retakes !== undefined && s.stale_retakes <= STALE_RETAKES_A_ROLLOUT_WAITS && waits.staleRetake();
  if (unanswered(s)) return reprobesItself(s) && waits.reprobe();
  return false;
}

/**
 * Whether a node has settled for its rollout: a status in ROLLOUT_SETTLED, except the loop's own
 * early re-look (looksAgainItself).
 */
export function settlesRollout(s: SettlingState, waits: RolloutWaits): boolean {
  if (!s.status || !ROLLOUT_SETTLED.includes(s.status)) return false;
  return !looksAgainItself(s, waits);
}

// ---------------------------------------------------------------------------------------------
// The gate: each node CONVERGED by a fresh observation, as the ledger records it, in time.

/** Statuses after which nothing more happens without new evidence, short of CONVERGED. */
const SETTLED_SHORT: readonly ConvergenceStatus[] = ['BLOCKED', 'CONFLICT', 'DRIFTED'];

/**
 * One node of a wave, judged on its loop's latest recorded decision (a note never counts): its
 * generation and digest, a fresh observation, CONVERGED. Not that within the deadline counted
 * from its start is `late`; settled anywhere else is `settled` (it waits for new evidence), save
 * a stale snapshot its loop re-takes itself when `waitsOutRetakes()` (asked only then).
 */
export function judgeGateNode(
  latest: GateEntry | null,
  bound: { generation: number; digest: string },
  clock: { startedAtMs: number; deadlineMs: number; nowMs: number },
  waits: RolloutWaits,
): GateNodeVerdict {
  const ours = latest !== null && latest.generation === bound.generation && latest.digest === bound.digest;
  if (ours && latest.status === 'CONVERGED' && latest.observation_fresh) return { verdict: 'converged', why: null };
  if (clock.nowMs - clock.startedAtMs > clock.deadlineMs)
    return {
      verdict: 'late',
      why: ours
        ? `not CONVERGED within the gate's deadline: its loop last recorded ${latest.status}/${latest.reason}`
        : `no decision of its loop at generation ${bound.generation} within the gate's deadline`,
    };
  // A stale snapshot the loop re-takes itself, or an unanswered pass it re-probes, is on its way
  // within the deadline (the ledger does not say how many came in a row; the deadline bounds the
  // wait): patches rollout-waits-out-stale-retake and rollout-waits-out-reprobe.
  // The entry holds no count, so any stale snapshot is taken for a retake (0 in a row).
  if (ours && SETTLED_SHORT.includes(latest.status) && !looksAgainItself({ ...latest, stale_retakes: 0 }, waits))
    return { verdict: 'settled', why: `its loop recorded ${latest.status}/${latest.reason}: ${latest.reason_detail}` };
  return { verdict: 'waiting', why: null };
}

/**
 * The wave as a whole: passed when every node converged; failed when a node is late, or when one
 * was refused or settled short of CONVERGED and no node it started is still on its way; else it
 * waits. A wave with a failure starts no more of its nodes, so those count as not on their way.
 */
export function waveGate(nodes: Array<{ verdict: GateNodeVerdict['verdict'] | 'refused' | 'unstarted' }>): WaveGate {
  const count = (v: string) => nodes.filter((n) => n.verdict === v).length;
  const failing = count('late') + count('refused') + count('settled');
  if (failing === 0 && count('converged') === nodes.length) return 'passed';
  // The deadline is the gate's promise: a late node halts at once. Anything else waits for the
  // nodes on their way, so the halt lists every failure of the wave.
  if (count('late') > 0 || (failing > 0 && count('waiting') === 0)) return 'failed';
  return 'waiting';
}

/** What is wrong with a rollout's waves (its input), in words; empty when nothing is. */
export function wavesProblems(nodes: string[], w: RolloutWaves | undefined): string[] {
  if (w === undefined) return [];
  if (!w || typeof w !== 'object' || !Array.isArray(w.waves) || w.waves.length === 0)
    return ['waves must be {"waves": [{"name": …, "nodes": [...]}, …], "max_unavailable": …, "gate_deadline": …}'];
  const problems: string[] = [];
  const seen = new Map<string, number>();
  w.waves.forEach((wave, i) => {
    if (
      !wave ||
      typeof wave.name !== 'string' ||
      !/^[A-Za-z0-9._-]{1,64}$/.test(wave.name) ||
      !Array.isArray(wave.nodes) ||
      wave.nodes.length === 0
    )
      problems.push(`wave ${i + 1} must have a name (letters, digits, ".", "_", "-") and at least one node`);
    else for (const n of wave.nodes) seen.set(n, (seen.get(n) ?? 0) + 1);
  });
  const twice = [...seen].filter(([, c]) => c > 1).map(([n]) => n);
  if (twice.length) problems.push(`in more than one wave: ${twice.slice(0, 5).join(', ')}`);
  const listed = new Set(nodes);
  const strangers = [...seen.keys()].filter((n) => !listed.has(n));
  if (strangers.length) problems.push(`in a wave but not in nodes: ${strangers.slice(0, 5).join(', ')}`);
  const missing = nodes.filter((n) => !seen.has(n));
  if (missing.length) problems.push(`in no wave: ${missing.slice(0, 5).join(', ')}`);
  if (
    w.max_unavailable !== null &&
    (typeof w.max_unavailable !== 'string' || typeof parseWaveSize(w.max_unavailable) === 'string')
  )
    problems.push('max_unavailable must be null, a number of nodes ("2") or a share of a wave ("25%")');
  if (typeof w.gate_deadline !== 'string' || !parseDuration(w.gate_deadline))
    problems.push(`gate_deadline must be a duration such as "10m"`);
  return problems;
}
