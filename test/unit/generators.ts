import fc from 'fast-check';
import { isCI } from '../../scripts/ci.cjs';
import type { Mode } from '../../src/domain';
import {
  PATHS,
  TARGET_NAMES,
  VALUES,
  type ConfigChange,
  type EntryName,
  type GenSpec,
  type Linger,
  type PassStep,
  type Script,
  type Step,
  type TargetName,
} from './node-model';

/*
 * Generators of scripts for the node model (./node-model.ts): sequences of generations with
 * renamed resources (the same target under another key), shared targets, operator decisions,
 * other writers (between passes, and between a plan and its apply), agent.yaml edits, hand-overs
 * with the old loop's pass still in flight, and reverts of the authority. A focus weighs the
 * steps toward what one property is about; every script can hold every kind of step.
 */

/** `arb` with probability `p`, else undefined (the field stays as it was). */
const maybe = <T>(arb: fc.Arbitrary<T>, p: number): fc.Arbitrary<T | undefined> =>
  fc.oneof(
    { weight: Math.round((1 - p) * 100), arbitrary: fc.constant(undefined) },
    { weight: Math.round(p * 100), arbitrary: arb },
  );

const weighted = <T>(choices: [number, fc.Arbitrary<T>][]): fc.Arbitrary<T> =>
  fc.oneof(...choices.filter(([w]) => w > 0).map(([weight, arbitrary]) => ({ weight, arbitrary })));

export const genSpecArb: fc.Arbitrary<GenSpec> = fc.record({
  releaseKey: fc.constantFrom('build', 'release'),
  version: fc.constantFrom('7.4', '7.5'),
  configKey: fc.constantFrom('config', 'settings'),
  configPath: fc.constantFrom(...PATHS),
  workers: fc.constantFrom(8, 16),
  flag: fc.constantFrom(false, true, null),
  shared: fc.constant(null),
  spelled: fc.constant(false),
});

const ENTRY_NAMES: EntryName[] = [
  'build',
  'release',
  'config',
  'settings',
  'maintenance',
  'app',
  'release:current',
  'file:etc/app/config.json',
  'file:etc/app/alt.json',
  'flag:maintenance',
  'service:app',
];
const entryArb = fc.record({
  kind: fc.constantFrom<'override' | 'observe'>('override', 'override', 'observe'),
  name: fc.constantFrom(...ENTRY_NAMES),
});

/** How a focus weighs the steps of a script. */
export interface Focus {
  steps: {
    pass: number;
    writer: number;
    resolve: number;
    config: number;
    generation: number;
    regress: number;
    wait: number;
    lose: number;
  };
  /** Share of passes in which another writer moves a marker between the plan and the apply. */
  between: number;
  /** Share of new generations whose document shares a target (invalid). */
  shared: number;
  /** Share of hand-overs with the old loop's pass still in flight. */
  linger: number;
  /** Share of fields a new generation changes: renames, versions, paths, content. */
  change: number;
  maxSteps: number;
  /**
   * Whether a pass may lose its probe after a marker moved between its plan and its apply. On
   * since the domain judges the agent's answers with the probe lost (071d6aa); it was off while
   * that was a hole, pinned by its own test in properties-sequences.test.ts.
   */
  probeLostAfterMove: boolean;
  /** Share of operator resolutions that yield (the rest retake). */
  yieldShare: number;
}

const BASE: Focus = {
  steps: { pass: 45, writer: 8, resolve: 6, config: 6, generation: 10, regress: 1, wait: 3, lose: 1 },
  between: 0.1,
  shared: 0.1,
  linger: 0.15,
  change: 0.3,
  maxSteps: 24,
  probeLostAfterMove: true,
  yieldShare: 0.5,
};

export const FOCUS = {
  /** agent.yaml entries by key and by target, renames that move keys between targets. */
  protections: { ...BASE, steps: { ...BASE.steps, config: 14, generation: 14 }, change: 0.4 },
  /** Markers that move between plan and apply, the operator's answers, and the generations after. */
  writers: { ...BASE, steps: { ...BASE.steps, writer: 6, resolve: 16, generation: 12, config: 2 }, between: 0.35, change: 0.2 },
  /** Yields, then generations that keep or change the yielded spec. */
  yields: {
    ...BASE,
    steps: { ...BASE.steps, writer: 6, resolve: 16, generation: 16, config: 2 },
    between: 0.35,
    change: 0.3,
    yieldShare: 0.75,
    maxSteps: 30,
  },
  /** Documents in which two keys claim one target. */
  shared: { ...BASE, steps: { ...BASE.steps, generation: 18 }, shared: 0.5 },
  /** Hand-overs with passes of the old loop in flight, and reverts of the authority. */
  fencing: { ...BASE, steps: { ...BASE.steps, generation: 18, regress: 5 }, linger: 0.7 },
  /** Everything at once, for the core invariants. */
  mixed: BASE,
} satisfies Record<string, Focus>;

export function passStepArb(f: Focus): fc.Arbitrary<PassStep> {
  const step = fc.record({
    kind: fc.constant('pass' as const),
    between: weighted<PassStep['between']>([
      [Math.round((1 - f.between) * 100), fc.constant(null)],
      // Mostly the target the batch writes first (so its compare-and-swap sees the move), sometimes any.
      [Math.round(f.between * 80), fc.record({ target: fc.constant('planned' as const), value: fc.nat(4) })],
      [Math.round(f.between * 20), fc.record({ target: fc.constantFrom(...TARGET_NAMES), value: fc.nat(4) })],
    ]),
    outcome: weighted<PassStep['outcome']>([
      [16, fc.constant('ok')],
      [2, fc.constant('ineffective')],
      [2, fc.constant('failed')],
    ]),
    probe: weighted<PassStep['probe']>([
      [40, fc.constant('fresh')],
      [1, fc.constant('unreachable')],
    ]),
    // Snapshots a few seconds old, now and then past the 60 s TTL by the time the pass decides.
    observeMs: weighted([
      [25, fc.integer({ min: 0, max: 2_000 })],
      [1, fc.integer({ min: 61_000, max: 120_000 })],
    ]),
    // Applies that take a moment, now and then long enough for the batch to outlive its snapshot.
    applyMs: weighted([
      [25, fc.integer({ min: 0, max: 1_000 })],
      [1, fc.integer({ min: 25_000, max: 45_000 })],
    ]),
    // The agent's clock: mostly the controller's; now and then ahead within the skew clocks may
    // have, at its edge, or beyond it by up to an hour (a node whose clock is wrong).
    aheadMs: weighted([
      [60, fc.constant(0)],
      [4, fc.integer({ min: 1, max: 5_000 })],
      [1, fc.constantFrom(5_000, 5_001)],
      [2, fc.integer({ min: 5_001, max: 3_600_000 })],
    ]),
  });
  return f.probeLostAfterMove ? step : step.map((p) => (p.between ? { ...p, probe: 'fresh' as const } : p));
}

const configChangeArb: fc.Arbitrary<ConfigChange> = weighted<ConfigChange>([
  [1, fc.record({ op: fc.constant('mode' as const), mode: fc.constantFrom<Mode>('observe', 'enforce', 'enforce') })],
  [4, fc.record({ op: fc.constant('add' as const), kind: entryArb.map((e) => e.kind), name: fc.constantFrom(...ENTRY_NAMES) })],
  [2, fc.record({ op: fc.constant('remove' as const), pick: fc.nat(5) })],
]);

function changeArb(f: Focus): fc.Arbitrary<Partial<GenSpec>> {
  const p = f.change;
  return fc
    .record({
      releaseKey: maybe(fc.constantFrom<GenSpec['releaseKey']>('build', 'release'), p),
      version: maybe(fc.constantFrom<GenSpec['version']>('7.4', '7.5'), p),
      configKey: maybe(fc.constantFrom<GenSpec['configKey']>('config', 'settings'), p),
      configPath: maybe(fc.constantFrom(...PATHS), p / 2),
      workers: maybe(fc.constantFrom<GenSpec['workers']>(8, 16), p),
      flag: maybe(fc.constantFrom<GenSpec['flag']>(false, true, null), p / 2),
      shared: weighted<GenSpec['shared']>([
        [Math.round((1 - f.shared) * 100), fc.constant(null)],
        [Math.round(f.shared * 50), fc.constant('release')],
        [Math.round(f.shared * 50), fc.constant('file')],
      ]),
      spelled: fc.boolean(),
    })
    .map((c) => Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)) as Partial<GenSpec>);
}

export function stepArb(f: Focus): fc.Arbitrary<Step> {
  const w = f.steps;
  return weighted<Step>([
    [w.pass, passStepArb(f)],
    [
      w.writer,
      fc.record({ kind: fc.constant('writer' as const), target: fc.constantFrom<TargetName>(...TARGET_NAMES), value: fc.nat(4) }),
    ],
    [
      w.resolve,
      fc.record({
        kind: fc.constant('resolve' as const),
        resolution: weighted<'yield' | 'retake'>([
          [Math.round(f.yieldShare * 100), fc.constant('yield')],
          [Math.round((1 - f.yieldShare) * 100), fc.constant('retake')],
        ]),
        pick: fc.nat(3),
      }),
    ],
    [w.config, fc.record({ kind: fc.constant('config' as const), change: configChangeArb })],
    [
      w.generation,
      fc.record({
        kind: fc.constant('generation' as const),
        change: changeArb(f),
        linger: weighted<Linger>([
          [Math.round((1 - f.linger) * 100), fc.constant(0)],
          [Math.round(f.linger * 40), fc.constant(1)],
          [Math.round(f.linger * 30), fc.constant(2)],
          [Math.round(f.linger * 30), fc.constant(3)],
        ]),
      }),
    ],
    [w.regress, fc.constant({ kind: 'regress' as const })],
    // Mostly a minute or two; sometimes past the 10 min conflict_window.
    [w.wait, fc.record({ kind: fc.constant('wait' as const), ms: fc.constantFrom(30_000, 90_000, 11 * 60_000) })],
    [w.lose, fc.constant({ kind: 'lose-datum' as const })],
  ]);
}

export function scriptArb(f: Focus): fc.Arbitrary<Script> {
  return fc.record({
    values: fc.record(
      Object.fromEntries(TARGET_NAMES.map((t) => [t, fc.nat(VALUES[t].length - 1)])) as Record<TargetName, fc.Arbitrary<number>>,
    ),
    spec: genSpecArb,
    mode: fc.constantFrom<Mode>('enforce', 'enforce', 'enforce', 'observe'),
    entries: weighted([
      [3, fc.constant([])],
      [2, fc.array(entryArb, { minLength: 1, maxLength: 2 })],
    ]),
    steps: fc.array(stepArb(f), { minLength: 4, maxLength: f.maxSteps }),
  });
}

// ---------------------------------------------------------------------------------------------
// How many cases, and proof that they reached what they are about.

/**
 * Cases per property. `core` (one or two decisions per case, properties.test.ts): 10^5 on CI
 * (CI=1, true or yes: scripts/ci.cjs, as the set-up reads it), 10^4 elsewhere. `sequences` (a node carried through several generations, a few to a
 * few dozen passes per case): 10^4 on CI, 2,000 elsewhere; 10^5 of those takes about an hour of one
 * core per property, so it runs as `npm run properties:full`, not in CI. DATUM_PROPERTY_RUNS
 * overrides every default. DATUM_PROPERTY_SEED replays one run (fast-check prints the seed and
 * path of a failure).
 */
export function propertyRuns(scale: 'core' | 'sequences' = 'core'): number {
  const given = process.env.DATUM_PROPERTY_RUNS;
  if (given !== undefined && given !== '') {
    const n = Number(given);
    if (!Number.isInteger(n) || n < 1)
      throw new Error(`DATUM_PROPERTY_RUNS=${given} is not a whole number of cases — fix: give one, such as 100000`);
    return n;
  }
  const ci = isCI();
  if (scale === 'sequences') return ci ? 10_000 : 2_000;
  return ci ? 100_000 : 10_000;
}

const seed = process.env.DATUM_PROPERTY_SEED;
if (seed !== undefined && seed !== '') fc.configureGlobal({ seed: Number(seed) });

/** A test's time limit for `runs` cases at most `msPerCase` each (a loaded CI box is slower), plus a minute. */
export const timeoutFor = (runs: number, msPerCase: number) => 60_000 + runs * msPerCase;

/**
 * Counts the generated cases that reach what a property is about. A property whose generator
 * never reaches its case passes vacuously, so each case has a minimum share of the runs (set
 * well below what the generator gives, so that no seed fails it by chance).
 */
export function coverage<K extends string>(minShare: Record<K, number>) {
  const counts = Object.fromEntries(Object.keys(minShare).map((l) => [l, 0])) as Record<K, number>;
  return {
    counts,
    hit: (label: K) => void counts[label]++,
    /** Labels below their share, as "label: count of runs (needs n)"; empty when every case was reached. */
    missed(runs: number): string[] {
      // DATUM_PROPERTY_REPORT=1 prints how often each case was reached (to set the shares, or to report them).
      if (process.env.DATUM_PROPERTY_REPORT) console.log(JSON.stringify({ runs, reached: counts }));
      return (Object.keys(minShare) as K[])
        .filter((label) => counts[label] < Math.ceil(minShare[label] * runs))
        .map((label) => `"${label}" in ${counts[label]} of ${runs} runs (needs ${Math.ceil(minShare[label] * runs)})`);
    },
  };
}
