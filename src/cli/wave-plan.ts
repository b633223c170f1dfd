import { promises as fs } from 'node:fs';
import { parse } from 'yaml';
import { z } from 'zod';
import type { RolloutWaves } from '../contract';
import { DURATION_HINT, parseDuration } from '../domain/duration';
import { parseSelector, readsLabels } from '../domain/selector';
import { parseWaveSize, parseWaveSizes, planWaves, type WaveSpec } from '../domain/waves';
import type { Labels } from '../domain/selector';
import { UsageError, withFix } from './errors';

/*
 * `datum rollout start --waves 1,10%,50%,100%` or `--wave-plan FILE` (docs/operations.md, "A
 * first production change, in waves"): the rollout's nodes split into waves here, so the rollout
 * workflow is given each wave's nodes by name.
 *
 *   # wave-plan.yaml
 *   waves:
 *     - { name: canary, selector: name=web-1 }
 *     - { selector: zone=a }
 *     - { size: 100% }            # the rest
 *   max_unavailable: 2            # or 25%, of a wave
 *   gate_deadline: 10m
 */

export const GATE_DEADLINE_DEFAULT = '10m';

const MAX_PLAN_BYTES = 64 * 1024;

const planFile = z.strictObject({
  waves: z
    .array(
      z.strictObject({
        name: z
          .string()
          .regex(/^[A-Za-z0-9._-]{1,64}$/, 'a wave name is letters, digits, ".", "_" or "-"')
          .optional(),
        size: z.union([z.string(), z.number()]).optional(),
        selector: z.string().optional(),
      }),
    )
    .min(1, 'list at least one wave'),
  max_unavailable: z.union([z.string(), z.number()]).optional(),
  gate_deadline: z.string().optional(),
});

export interface WaveFlags {
  waves?: string;
  wavePlan?: string;
  maxUnavailable?: string;
  gateDeadline?: string;
}

/** Whether the flags ask for waves at all. */
export const wantsWaves = (f: WaveFlags) =>
  f.waves !== undefined || f.wavePlan !== undefined || f.maxUnavailable !== undefined || f.gateDeadline !== undefined;

/** The specs and settings the flags (and the plan file) give, checked; null when they ask for no waves. */
export async function waveSettings(
  f: WaveFlags,
): Promise<{ specs: WaveSpec[]; max_unavailable: string | null; gate_deadline: string } | null> {
  if (!wantsWaves(f)) return null;
  if ((f.waves === undefined) === (f.wavePlan === undefined))
    throw new UsageError(withFix('which waves?', 'give --waves 1,10%,50%,100% or --wave-plan FILE (one of them)'));
  const plan = f.wavePlan === undefined ? null : await readPlan(f.wavePlan);
  const specs = plan ? plan.specs : sizesOf(f.waves!);
  const max = f.maxUnavailable ?? plan?.max_unavailable ?? null;
  if (max !== null && typeof parseWaveSize(max) === 'string')
    throw new UsageError(withFix(`--max-unavailable ${JSON.stringify(max)} is not a number or a share`, 'such as 2 or 25%'));
  const deadline = f.gateDeadline ?? plan?.gate_deadline ?? GATE_DEADLINE_DEFAULT;
  if (!parseDuration(deadline))
    throw new UsageError(withFix(`--gate-deadline ${JSON.stringify(deadline)} is not a duration`, DURATION_HINT));
  return { specs, max_unavailable: max, gate_deadline: deadline };
}

function sizesOf(text: string): WaveSpec[] {
  const parsed = parseWaveSizes(text);
  if (!parsed.ok) throw new UsageError(parsed.error);
  return parsed.sizes.map((size) => ({ size }));
}

async function readPlan(file: string): Promise<{ specs: WaveSpec[]; max_unavailable?: string; gate_deadline?: string }> {
  const bad = (problem: string) =>
    new UsageError(withFix(`--wave-plan ${file}: ${problem}`, 'see docs/operations.md, "A first production change, in waves"'));
  const stat = await fs.stat(file).catch(() => null);
  if (!stat?.isFile()) throw bad('is not a readable file');
  if (stat.size > MAX_PLAN_BYTES) throw bad(`is larger than ${MAX_PLAN_BYTES} bytes`);
  let data: unknown;
  try {
    data = parse(await fs.readFile(file, 'utf8'), { maxAliasCount: 10 });
  } catch (error) {
    throw bad(`is not YAML (${(error as Error).message.split('\n')[0]})`);
  }
  const checked = planFile.safeParse(data);
  if (!checked.success) throw bad(checked.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; '));
  const specs = checked.data.waves.map((w, i): WaveSpec => {
    if ((w.size === undefined) === (w.selector === undefined)) throw bad(`waves.${i}: give size or selector (one of them)`);
    if (w.selector !== undefined) {
      const s = parseSelector(w.selector);
      if (!s.ok) throw bad(`waves.${i}.selector: ${s.error}`);
      return { ...(w.name ? { name: w.name } : {}), selector: s.selector };
    }
    const size = parseWaveSize(String(w.size));
    if (typeof size === 'string') throw bad(`waves.${i}.size: ${size}`);
    return { ...(w.name ? { name: w.name } : {}), size };
  });
  const m = checked.data.max_unavailable;
  return {
    specs,
    ...(m !== undefined ? { max_unavailable: String(m) } : {}),
    ...(checked.data.gate_deadline ? { gate_deadline: checked.data.gate_deadline } : {}),
  };
}

/** Whether any wave's selector reads labels (then the fleet directory is read for them). */
export const specsReadLabels = (specs: WaveSpec[]) => specs.some((s) => 'selector' in s && readsLabels(s.selector));

/** The rollout's nodes in waves, or a usage error saying why they do not split. */
export function wavesFor(
  nodes: string[],
  settings: { specs: WaveSpec[]; max_unavailable: string | null; gate_deadline: string },
  labels: Map<string, Labels>,
): RolloutWaves {
  const planned = planWaves(nodes, settings.specs, (n) => labels.get(n) ?? {});
  if (!planned.ok) throw new UsageError(`waves: ${planned.error}`);
  return { waves: planned.waves, max_unavailable: settings.max_unavailable, gate_deadline: settings.gate_deadline };
}
