import { promises as fs } from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { workflowsPath } from '../../src/worker/paths';
import { workflowInterceptorModules } from '../../src/worker/bundle';
import { installTestRuntime } from '../helpers/temporal';

/*
 * Histories recorded from the integration run of each release (DATUM_RECORD_HISTORIES=1 npx
 * vitest run test/integration writes test/histories/<version>/, never over a committed file),
 * replayed against today's workflow code: a change that would break a workflow still running on
 * an older release (non-determinism) fails here, before it reaches a fleet.
 */
const DIR = path.join(__dirname, '..', 'histories');

describe('replay of recorded histories', () => {
  it('every recorded history replays without non-determinism', async () => {
    installTestRuntime();
    // One directory per release that recorded them (test/helpers/stack.ts recordHistory).
    const files = (await fs.readdir(DIR, { recursive: true })).filter((f) => f.endsWith('.json')).sort();
    expect(files.filter((f) => f.startsWith(`0.1.0${path.sep}`)).length).toBeGreaterThanOrEqual(8);
    const histories = await Promise.all(
      files.map(async (f) => ({
        workflowId: f.replace(/\.json$/, ''),
        history: historyFromJSON(JSON.parse(await fs.readFile(path.join(DIR, f), 'utf8'))),
      })),
    );
    const failures: string[] = [];
    let replayed = 0;
    for await (const result of Worker.runReplayHistories(
      { workflowsPath: workflowsPath(), interceptors: { workflowModules: workflowInterceptorModules() } },
      histories,
    )) {
      replayed++;
      if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
    }
    expect(failures).toEqual([]);
    expect(replayed).toBe(files.length);
  });
});
