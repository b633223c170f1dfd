import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { resolveConflictSignal } from '../../src/contract';
import { FAST_POLICY } from '../helpers/fleet';
import { useStack } from '../helpers/stack';
import { useChildren } from '../helpers/processes';

/*
 * Hole 10b of issue 18: a writer that flips a managed file back more slowly than conflict_window
 * was new drift every time, repaired with a fresh budget, forever (seed 000 §9: "when another
 * writer keeps changing the field, stop with BLOCKED or CONFLICT"). The attack, on real processes
 * (dev server, controller worker, agent, a separate writer process): each time Datum's content
 * appears in the file, the writer waits three times conflict_window and writes its own back. The
 * loop must stop as CONFLICT (REPEATED_DRIFT) after writer_repairs repairs, with the repairs as
 * the evidence, and repair nothing more until an operator decides.
 */

const CONFLICT_WINDOW_MS = 1000;
const WRITER_DELAY_MS = 3 * CONFLICT_WINDOW_MS;
const POLICY = { ...FAST_POLICY, conflict_window: `${CONFLICT_WINDOW_MS}ms`, writer_horizon: '5m', writer_repairs: 3 };
const CONFIG = 'etc/app/config.json';

const stack = useStack();
const children = useChildren();

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * Another writer, slower than conflict_window: whenever the file holds anything but `content`,
 * it waits `delayMs` from when it first saw that, then puts `content` back (atomically, so no
 * reader sees half a file).
 */
function startSlowWriter(file: string, content: string, delayMs: number): ChildProcess {
  const script = `const fs=require('fs');const [f,c,d]=process.argv.slice(1);let seen=null;
setInterval(()=>{let cur=null;try{cur=fs.readFileSync(f,'utf8')}catch{}
if(cur===c){seen=null;return}if(seen===null){seen=Date.now();return}
if(Date.now()-seen>=Number(d)){fs.writeFileSync(f+'.w',c);fs.renameSync(f+'.w',f);seen=null}},100);`;
  const child = spawn(process.execPath, ['-e', script, file, content, String(delayMs)], { stdio: 'ignore' });
  children.push(child);
  return child;
}

const writesOf = (ledger: LedgerEntry[], key: string) =>
  ledger.flatMap((e) => e.execution_evidence).filter((ev) => ev.resource_key === key && ev.outcome === 'applied');

describe('attack: a writer that flips a managed file back more slowly than conflict_window', () => {
  it('ends in CONFLICT (REPEATED_DRIFT) after writer_repairs repairs, with the repairs as evidence, instead of repairing forever', async () => {
    const node = 'SW-1';
    const file = path.join(stack.fleet.root(node), CONFIG);
    const ours = fileBytes({ workers: 8 });
    const theirs = fileBytes({ workers: 2 });
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const resources = {
      config: { type: 'file', path: CONFIG, content: { workers: 8 } },
      maintenance: { type: 'flag', value: false },
    };
    await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation: 1, resources, policy: POLICY }));
    const handle = await stack.startNode(node, 1);
    // Datum's first write is repair 1 of the file.
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    startSlowWriter(file, theirs, WRITER_DELAY_MS);

    const stopped = await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT', 120_000);
    expect(stopped).toMatchObject({ reason: 'REPEATED_DRIFT', recheck_trigger: { trigger: 'OPERATOR_RESOLUTION' } });
    const condition = stopped.conditions.find((c) => c.type === 'CONFLICTING_WRITER');
    expect(condition).toMatchObject({ resource_key: 'config', needs_judgement: true });
    expect(condition?.message).toMatch(/"config" drifted again after 3 repair\(s\) within writer_horizon 300s/);

    // The evidence: each earlier repair (the writer's value it answered, Datum's value it proved), then this drift.
    const ledger = await stack.ledger(handle);
    const entry = ledger.find((e) => e.reason === 'REPEATED_DRIFT')!;
    const sequence = entry.conflicting_writer_evidence!.find((c) => c.resource_key === 'config')!.sequence;
    expect(sequence.map((p) => p.value)).toEqual([null, sha(ours), sha(theirs), sha(ours), sha(theirs), sha(ours), sha(theirs)]);
    // Each flip came after conflict_window: none of them was a flip the window catches.
    for (const i of [2, 4, 6])
      expect(Date.parse(sequence[i].at) - Date.parse(sequence[i - 1].at)).toBeGreaterThan(CONFLICT_WINDOW_MS);
    expect(writesOf(ledger, 'config')).toHaveLength(3);

    // Repair stops: three more passes judge fresh snapshots, Datum writes nothing, the writer's bytes stay.
    const still = await stack.waitForPass(handle, Date.now(), 3);
    expect(still.convergence_status).toBe('CONFLICT');
    expect(writesOf(await stack.ledger(handle), 'config')).toHaveLength(3);
    expect(await fs.readFile(file, 'utf8')).toBe(theirs);

    // The operator's answer works as for any conflict: yield leaves the file to the writer.
    await handle.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'yield', by: 'oncall', note: 'tuner' });
    const yielded = await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    expect(yielded.conditions).toEqual([]);
    expect(await fs.readFile(file, 'utf8')).toBe(theirs);
    await handle.terminate('test done');
  }, 180_000);
});
