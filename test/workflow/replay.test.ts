import { promises as fs } from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker, type InjectedSinks } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { PATCHES, PATCH_SINK, type DatumPatchSinks, type PatchId } from '../../src/contract';
import { workflowsPath } from '../../src/worker/paths';
import { workflowInterceptorModules } from '../../src/worker/bundle';
import { installTestRuntime } from '../helpers/temporal';

/*
 * Histories recorded from the integration run of each release (DATUM_RECORD_HISTORIES=1 npx
 * vitest run test/integration writes test/histories/<version>/, never over a committed file),
 * replayed against today's workflow code: a change that would break a workflow still running on
 * an older release (non-determinism) fails here, before it reaches a fleet. The patch registry
 * (src/contract/patches.ts) says which histories take which patch's old branch; the replay
 * reports each old branch it takes (PATCH_SINK), and the two must agree.
 */
const DIR = path.join(__dirname, '..', 'histories');

/** Each history's name (<release>/<file> without .json) and the patches whose old branch its replay took. */
type Replays = Map<string, { error?: Error; oldBranches: Set<PatchId> }>;
/**
 * By bundle: a loop may move between workers that trace and workers that do not (the tracing
 * interceptor is bundled only for the first), so every history replays with both bundles.
 */
const replayed = new Map<boolean, Replays>();
let names: string[] = [];

async function replayAll(tracing: boolean, histories: { workflowId: string; history: ReturnType<typeof historyFromJSON> }[]) {
  const oldBranches = new Map<string, Set<PatchId>>(names.map((n) => [n, new Set()]));
  const sinks: InjectedSinks<DatumPatchSinks> = {
    [PATCH_SINK]: {
      oldBranch: { fn: (info, patch) => void oldBranches.get(info.workflowId)?.add(patch), callDuringReplay: true },
    },
  };
  const out: Replays = new Map();
  for await (const result of Worker.runReplayHistories(
    { workflowsPath: workflowsPath(), interceptors: { workflowModules: workflowInterceptorModules({ tracing }) }, sinks },
    histories,
  )) {
    out.set(result.workflowId, { error: result.error, oldBranches: oldBranches.get(result.workflowId)! });
  }
  replayed.set(tracing, out);
}

beforeAll(async () => {
  installTestRuntime();
  // One directory per release that recorded them (test/helpers/stack.ts recordHistory).
  const files = (await fs.readdir(DIR, { recursive: true })).filter((f) => f.endsWith('.json')).sort();
  names = files.map((f) =>
    f
      .replace(/\.json$/, '')
      .split(path.sep)
      .join('/'),
  );
  const histories = await Promise.all(
    files.map(async (f, i) => ({
      workflowId: names[i],
      history: historyFromJSON(JSON.parse(await fs.readFile(path.join(DIR, f), 'utf8'))),
    })),
  );
  for (const tracing of [false, true]) await replayAll(tracing, histories);
}, 900_000);

describe('replay of recorded histories', () => {
  it('every recorded history is replayed, 0.1.0 among them', () => {
    expect(names.filter((n) => n.startsWith('0.1.0/')).length).toBeGreaterThanOrEqual(8);
    for (const tracing of [false, true]) expect([...replayed.get(tracing)!.keys()].sort()).toEqual(names);
  });

  it.each([false, true])('every recorded history replays without non-determinism (bundle with tracing: %s)', (tracing) => {
    const failures = [...replayed.get(tracing)!].filter(([, r]) => r.error).map(([name, r]) => `${name}: ${r.error!.message}`);
    expect(failures).toEqual([]);
  });
});

describe('the patch registry against the recorded histories', () => {
  for (const [id, patch] of Object.entries(PATCHES) as Array<[PatchId, (typeof PATCHES)[PatchId]]>) {
    it(`${id}: its old branch is taken by exactly the histories the registry lists`, () => {
      const taking = names.filter((n) => replayed.get(false)!.get(n)?.oldBranches.has(id));
      expect(taking).toEqual([...patch.histories].sort());
      // The traced bundle decides the same: tracing adds headers to commands, never commands.
      expect(names.filter((n) => replayed.get(true)!.get(n)?.oldBranches.has(id))).toEqual(taking);
      // deprecatePatch() takes the new branch in every replay: no history may still need the old one.
      if (patch.stage === 'deprecated') expect(taking).toEqual([]);
    });
  }
});
