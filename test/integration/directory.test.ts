import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterEach, describe, expect, it } from 'vitest';
import { workItemId, workItemQuery, type WorkItem } from '../../src/contract';
import { FAST_POLICY } from '../helpers/fleet';
import { statusesOf, useStack } from '../helpers/stack';
import { until } from '../helpers/until';

/*
 * The directory type on the whole loop: a real dev server, the controller worker, real agents on
 * temp roots. A directory with an owner and a mode converges; a chmod by hand is repaired; an
 * observe-mode host reports the drift and changes nothing; a writer that keeps changing the mode
 * after Datum's repair is CONFLICT with its evidence; a file where the directory should be is
 * never replaced, and is handed over as a work item. Owners other than the agent's need root.
 */

const stack = useStack();
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

const DATA = { type: 'directory', path: 'srv/data', mode: '0750', owner: 'daemon', group: 'adm' };
const dataDir = (node: string) => path.join(stack.fleet.root(node), 'srv/data');

/**
 * A short conflict_window: a drift that comes later than this after Datum's repair is new drift,
 * repaired; one within it undoes Datum's write, and is another writer.
 */
const CONFLICT_WINDOW_MS = 2000;

async function writeDesired(node: string, generation: number): Promise<void> {
  const doc = {
    node,
    generation,
    resources: { data: DATA },
    policy: { ...FAST_POLICY, conflict_window: `${CONFLICT_WINDOW_MS / 1000}s` },
  };
  await fs.writeFile(stack.fleet.desiredFile(node), stringify(doc));
}

async function loop(node: string, mode: 'observe' | 'enforce') {
  await writeDesired(node, 1);
  await stack.fleet.writeAgent(node, { mode });
  await stack.startAgent(node);
  return await stack.startNode(node, 1);
}

async function attributes(p: string) {
  const st = await fs.lstat(p);
  return { mode: (st.mode & 0o7777).toString(8).padStart(4, '0'), uid: st.uid, gid: st.gid };
}

/** Another writer, as a real process: keeps `dir` at mode 0777, every 50 ms. */
function chmodWriter(dir: string): ChildProcess {
  const script = `const fs=require('fs');const d=process.argv[1];setInterval(()=>{try{if((fs.lstatSync(d).mode&0o7777)!==0o777)fs.chmodSync(d,0o777)}catch{}},50);`;
  const child = spawn(process.execPath, ['-e', script, dir], { stdio: 'ignore' });
  children.push(child);
  return child;
}

describe.runIf(process.getuid?.() === 0)('a directory resource on the loop', () => {
  it('converges with its owner and mode, repairs a chmod by hand, and a writer that keeps at it is CONFLICT', async () => {
    const node = 'D-1';
    const handle = await loop(node, 'enforce');
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    expect(await attributes(dataDir(node))).toEqual({ mode: '0750', uid: 1, gid: 4 });
    const first = await stack.ledger(handle);
    expect(first.flatMap((e) => e.authorized_actions.map((a) => `${a.resource_key}:${a.action}`))).toEqual([
      'data:directory.ensure',
    ]);
    // Proven by the fresh probe after the write: the value observe read back is the desired one.
    const proof = first.at(-1)!;
    expect(`${proof.convergence_status}/${proof.reason}`).toBe('CONVERGED/CONVERGED_AFTER_REPAIR');
    expect(proof.resources.find((r) => r.resource_key === 'data')).toMatchObject({
      desired: { mode: '0750', owner: 'daemon', group: 'adm' },
      observed: null,
    });
    expect(proof.post_action_observation).toMatchObject({
      resources: { data: { value: { mode: '0750', owner: 'daemon', group: 'adm' }, drift: false } },
    });

    // A chmod by hand, past conflict_window: the watch wakes the loop, which repairs it on the same inode.
    const repairedBefore = first.filter((e) => e.reason === 'CONVERGED_AFTER_REPAIR').length;
    await new Promise((r) => setTimeout(r, CONFLICT_WINDOW_MS + 500));
    await stack.waitForWatch(handle);
    const ino = (await fs.lstat(dataDir(node))).ino;
    await fs.chmod(dataDir(node), 0o777);
    await stack.waitFor(
      handle,
      (_s, ledger) => ledger.filter((e) => e.reason === 'CONVERGED_AFTER_REPAIR').length > repairedBefore,
    );
    expect(await attributes(dataDir(node))).toEqual({ mode: '0750', uid: 1, gid: 4 });
    expect((await fs.lstat(dataDir(node))).ino).toBe(ino);

    // Another writer that undoes every repair: CONFLICT, with the sequence of what it left.
    chmodWriter(dataDir(node));
    const conflict = await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');
    expect(conflict.conditions.map((c) => [c.type, c.resource_key])).toEqual([['CONFLICTING_WRITER', 'data']]);
    const ledger = await stack.ledger(handle);
    const entry = ledger.find((e) => e.convergence_status === 'CONFLICT')!;
    const evidence = entry.conflicting_writer_evidence!.find((e) => e.resource_key === 'data')!;
    expect(evidence.sequence.length).toBeGreaterThanOrEqual(2);
    expect(evidence.sequence.at(-1)?.value).toEqual({ mode: '0777', owner: 'daemon', group: 'adm' });
    expect(new Set(evidence.sequence.map((s) => s.marker)).size).toBeGreaterThan(1);
    // Repair stops: passes on fresh snapshots act on nothing while the conflict is open.
    const acted = (entries: typeof ledger) => entries.filter((e) => e.authorized_actions.length > 0).length;
    await stack.waitForPass(handle, Date.now(), 2);
    expect(acted(await stack.ledger(handle))).toBe(acted(ledger));
    await handle.terminate('test done');
  });

  it('on an observe-mode host: DRIFTED with the plan, and the directory is left as it is', async () => {
    const node = 'D-2';
    await fs.mkdir(dataDir(node), { recursive: true });
    await fs.chmod(dataDir(node), 0o777);
    const before = await attributes(dataDir(node));
    const handle = await loop(node, 'observe');
    const drifted = await stack.waitFor(handle, (s) => s.convergence_status === 'DRIFTED');
    expect(drifted.reason).toBe('OBSERVE_MODE_DRIFT');
    await stack.waitForPass(handle, Date.now(), 2);
    const ledger = await stack.ledger(handle);
    const last = ledger.at(-1)!;
    expect(last.planned_actions.map((a) => `${a.resource_key}:${a.action}`)).toEqual(['data:directory.ensure']);
    expect(ledger.flatMap((e) => e.authorized_actions)).toEqual([]);
    expect(ledger.flatMap((e) => e.execution_evidence)).toEqual([]);
    expect(await attributes(dataDir(node))).toEqual(before);
    await handle.terminate('test done');
  });

  it('a file where the directory should be: BLOCKED / DESTRUCTIVE_REPAIR_REQUIRED, a work item, and the file kept', async () => {
    const node = 'D-3';
    await fs.mkdir(path.dirname(dataDir(node)), { recursive: true });
    await fs.writeFile(dataDir(node), 'an operator keeps this file here\n');
    const handle = await loop(node, 'enforce');
    const blocked = await stack.waitFor(handle, (s) => s.convergence_status === 'BLOCKED');
    expect(blocked).toMatchObject({ reason: 'DESTRUCTIVE_REPAIR_REQUIRED', recheck_trigger: { trigger: 'OPERATOR_RESOLUTION' } });
    expect(blocked.conditions.map((c) => [c.type, c.resource_key])).toEqual([['DESTRUCTIVE_REPAIR_REQUIRED', 'data']]);
    expect(blocked.conditions[0]?.message).toMatch(
      /"srv\/data" is a regular file, not a directory; making it the directory would destroy what is there/,
    );

    const id = workItemId(node, 'DESTRUCTIVE_REPAIR_REQUIRED', 'data');
    const item = await until(() => stack.client.workflow.getHandle(id).query(workItemQuery), {
      what: `${id} to be open`,
      accept: (i: WorkItem) => i.state === 'OPEN' || i.state === 'ESCALATED',
      errors: 'retry',
    });
    expect(item).toMatchObject({ node, condition: 'DESTRUCTIVE_REPAIR_REQUIRED', resource_key: 'data', resolver: 'operator' });

    const ledger = await stack.ledger(handle);
    expect(statusesOf(ledger)).not.toContain('CONVERGED/CONVERGED_AFTER_REPAIR');
    expect(ledger.flatMap((e) => e.authorized_actions)).toEqual([]);
    expect(ledger.at(-1)?.planned_actions[0]).toMatchObject({ action: 'directory.ensure', destructive: true, authorized: false });
    expect(await fs.readFile(dataDir(node), 'utf8')).toBe('an operator keeps this file here\n');
    await handle.terminate('test done');
  });
});
