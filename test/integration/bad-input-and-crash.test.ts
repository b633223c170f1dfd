import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { fileBytes } from '../../src/domain';
import { projectRoot } from '../../src/worker/paths';
import { DatumConditions, DatumStatus, MEMO_SUMMARY, ledgerQuery, reconcileWorkflowId, stateQuery } from '../../src/contract';
import { sha256 as sha256Of, tarGz } from '../agent/helpers';
import { statusesOf, useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { useChildren } from '../helpers/processes';

/*
 * Bad input reaches no node, and a controller killed mid-pass loses nothing and repeats nothing.
 */

const stack = useStack();
const children = useChildren();

async function failureOf(node: string, generation: number): Promise<string> {
  const handle = await stack.startNode(node, generation);
  const error = await handle.result().then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WorkflowFailedError);
  const cause = (error as WorkflowFailedError).cause;
  return `${cause?.name}: ${cause?.message}`;
}

/** A loop waiting at its start for valid desired state: running, BLOCKED in visibility, the error in its memo and details. */
async function waitForInvalidAtStart(handle: WorkflowHandle): Promise<{ summary: string; details: string }> {
  const d = await until(() => handle.describe(), {
    what: 'the loop to show INVALID_DESIRED_STATE',
    accept: ({ typedSearchAttributes: attributes }) =>
      attributes.get(DatumStatus) === 'BLOCKED' && (attributes.get(DatumConditions) ?? []).includes('INVALID_DESIRED_STATE'),
    timeoutMs: 30_000,
  });
  expect(d.status.name).toBe('RUNNING');
  const memo = d.memo?.[MEMO_SUMMARY];
  const summary = typeof memo === 'string' ? memo : '';
  // The workflow's current details, as the Web UI shows them (the SDK's built-in metadata query).
  const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
  return { summary, details: metadata.currentDetails ?? '' };
}

async function listTree(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string) => {
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      const full = path.join(d, e.name);
      out.push(path.relative(dir, full));
      if (e.isDirectory()) await walk(full);
    }
  };
  await walk(dir);
  return out.sort();
}

/** What a root holds besides the running agent's mark of its presence (.datum/holder.json, which reset-fence checks). */
async function nodeContent(root: string): Promise<string[]> {
  return (await listTree(root)).filter((rel) => rel !== '.datum' && rel !== path.join('.datum', 'holder.json'));
}

describe('bad input reaches no node', () => {
  it('a loop started on a desired-state file that fails validation waits BLOCKED with the file, field and fix, and reconciles once it is fixed', async () => {
    const node = 'B-1';
    await stack.fleet.writeDesired(node, 1, { extra: { cache: { type: 'pkg', name: 'redis' } } });
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    const blocked = await waitForInvalidAtStart(handle);
    expect(blocked.summary).toMatch(
      /^BLOCKED INVALID_DESIRED_STATE \(gen 1\): desired\/nodes\/B-1\.yaml: invalid desired state; nothing from this file was applied/,
    );
    expect(blocked.details).toMatch(
      /resources\.cache\.type: unknown resource type "pkg" — fix: use one of release, file, service, flag/,
    );
    expect(await nodeContent(stack.fleet.root(node))).toEqual([]);
    // Fixed: the loop reads it again (every 30 s) and reconciles as if started now.
    await stack.fleet.writeDesired(node, 1);
    const state = await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED', 90_000);
    expect(state.convergence_status).toBe('CONVERGED');
    // The repair is in the ledger (the state may already show the steady pass after it).
    expect((await stack.ledger(handle)).map((e) => e.reason)).toContain('CONVERGED_AFTER_REPAIR');
    await handle.terminate('test done');
  });

  it('a workflow started for an unknown node fails and names the missing file', async () => {
    const message = await failureOf('NO-SUCH-NODE', 1);
    expect(message).toMatch(
      /no desired state for node "NO-SUCH-NODE": .*desired\/nodes\/NO-SUCH-NODE\.yaml does not exist — fix:/,
    );
  });

  it('a workflow started for a generation the authority does not hold fails with the fix', async () => {
    await stack.fleet.writeDesired('B-2', 3);
    const message = await failureOf('B-2', 2);
    expect(message).toMatch(/the authority for B-2 is at generation 3, not 2 — fix:/);
  });

  it('a missing artifact blocks the loop before any node is touched', async () => {
    const node = 'B-3';
    await stack.fleet.writeDesired(node, 1, { artifact: 'app-9.9.tgz', version: '9.9' });
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    const blocked = await waitForInvalidAtStart(handle);
    expect(blocked.details).toMatch(
      /resources\.build\.artifact: artifacts\/app-9\.9\.tgz does not exist .* — fix: build the release's archive/,
    );
    expect(await nodeContent(stack.fleet.root(node))).toEqual([]);
    await handle.terminate('test done');
  });

  it('a signal with a malformed payload is recorded, raises INVALID_SIGNAL, and changes nothing else', async () => {
    const node = 'B-4';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const actedBefore = (await handle.query(ledgerQuery)).filter((e) => e.authorized_actions.length > 0).length;
    const configBefore = await fs.readFile(path.join(stack.fleet.root(node), 'etc/app/config.json'), 'utf8');
    await handle.signal('resolveConflict', { resource_key: 'config', resolution: 'maybe' });
    const state = await stack.waitFor(handle, (s) => s.conditions.some((c) => c.type === 'INVALID_SIGNAL'));
    expect(state.convergence_status).toBe('CONVERGED');
    const condition = state.conditions.find((c) => c.type === 'INVALID_SIGNAL')!;
    expect(condition.message).toMatch(/resolution: must be "retake" or "yield" .*fix: retake to let Datum own/);
    expect(condition.message).toMatch(/by: is missing/);
    const ledger = await handle.query(ledgerQuery);
    expect(statusesOf(ledger)).toContain('CONVERGED/SIGNAL_REJECTED');
    // A second malformed signal of another name joins the same condition …
    await handle.signal('refreshDesired', { generation: 'twelve' });
    const signalsIn = (s: { conditions: Array<{ type: string; evidence: unknown }> }) =>
      Object.keys(
        (s.conditions.find((c) => c.type === 'INVALID_SIGNAL')?.evidence as { signals?: object } | undefined)?.signals ?? {},
      ).sort();
    await stack.waitFor(handle, (s) => signalsIn(s).join() === 'refreshDesired,resolveConflict');
    // … and a valid signal of a name closes that name's part (here: a refresh that re-binds).
    const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
    if (!read.ok) throw new Error(read.error);
    await handle.signal('refreshDesired', { generation: 1, digest: read.intent.digest });
    await stack.waitFor(handle, (s) => signalsIn(s).join() === 'resolveConflict');
    const rebound = (await handle.query(ledgerQuery)).find((e) => e.reason === 'REBOUND');
    expect(rebound?.convergence_status).toBe('CONVERGED');
    // … and nothing else changed: the passes after it find the node converged and act on nothing.
    expect((await stack.waitForPass(handle, Date.parse(rebound!.decided_at), 2)).convergence_status).toBe('CONVERGED');
    expect((await handle.query(ledgerQuery)).filter((e) => e.authorized_actions.length > 0)).toHaveLength(actedBefore);
    expect(await fs.readFile(path.join(stack.fleet.root(node), 'etc/app/config.json'), 'utf8')).toBe(configBefore);
    await handle.terminate('test done');
    await stack.recordHistory(handle, 'malformed-signals');
  });

  it('a file path through a symlink that leaves the root is refused, and no byte lands outside', async () => {
    const node = 'B-5';
    const outside = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-outside-'));
    try {
      await stack.fleet.writeDesired(node, 1);
      await stack.fleet.writeAgent(node);
      const root = stack.fleet.root(node);
      await fs.mkdir(root, { recursive: true });
      await fs.symlink(outside, path.join(root, 'etc'));
      await stack.startAgent(node);
      const handle = await stack.startNode(node, 1);
      const state = await stack.waitFor(handle, (s) => s.convergence_status === 'BLOCKED');
      expect(state.reason).toBe('ACTION_REFUSED');
      const ledger = await handle.query(ledgerQuery);
      const refusal = ledger.flatMap((e) => e.execution_evidence).find((e) => e.outcome === 'refused')!;
      expect(refusal.refusal).toMatch(/^PathOutsideRoot: .*"etc", a symlink to .* outside the node root/);
      expect(await listTree(outside)).toEqual([]);
      await handle.terminate('test done');
    } finally {
      await fs.rm(outside, { recursive: true, force: true });
    }
  });

  it('a release archive with an entry that would leave the root is refused before anything is unpacked', async () => {
    const node = 'B-6';
    const evil = path.join(stack.fleet.dir, 'artifacts', 'app-6.6.tgz');
    const bytes = tarGz([
      { name: 'server.js', content: 'console.log(1)\n' },
      { name: '../../../escaped.txt', content: 'pwned\n' },
    ]);
    await fs.writeFile(evil, bytes);
    const sha256 = sha256Of(bytes);
    const doc = {
      node,
      generation: 1,
      resources: { build: { type: 'release', version: '6.6', artifact: 'artifacts/app-6.6.tgz', sha256 } },
      policy: { resync_interval: '1s', node_timeout: '3s' },
    };
    await fs.writeFile(stack.fleet.desiredFile(node), stringify(doc));
    await stack.fleet.writeAgent(node);
    // The earlier tests' loops are terminated, but an apply their agents had already taken still
    // lands (B-5's flag write did, in CI, after this listing): their agents stop first, so only
    // this node's agent can move a file while the tree is compared.
    await Promise.all([...stack.agents.keys()].map((other) => stack.stopAgent(other)));
    await stack.startAgent(node);
    const before = await listTree(stack.fleet.dir);
    const handle = await stack.startNode(node, 1);
    const state = await stack.waitFor(handle, (s) => s.convergence_status === 'BLOCKED');
    expect(state.reason).toBe('ACTION_REFUSED');
    const ledger = await handle.query(ledgerQuery);
    expect(ledger.flatMap((e) => e.execution_evidence).find((e) => e.outcome === 'refused')!.refusal).toMatch(
      /^PathOutsideRoot: .*archive entry "\.\.\/\.\.\/\.\.\/escaped\.txt"/,
    );
    // Everything outside this node's root is as it was, other nodes' files and their agents'
    // bookkeeping (.datum/) included: no other agent runs.
    const elsewhere = (p: string) => !p.startsWith(`nodes/${node}/`) && p !== `nodes/${node}`;
    expect((await listTree(stack.fleet.dir)).filter(elsewhere)).toEqual(before.filter(elsewhere));
    await expect(fs.access(path.join(path.dirname(stack.fleet.dir), 'escaped.txt'))).rejects.toThrow();
    // Nothing was unpacked inside the root either: no releases/6.6, and current not switched.
    await expect(fs.access(path.join(stack.fleet.root(node), 'releases/6.6'))).rejects.toThrow(/ENOENT/);
    await expect(fs.lstat(path.join(stack.fleet.root(node), 'current'))).rejects.toThrow(/ENOENT/);
    await handle.terminate('test done');
  });
});

describe('controller worker killed mid-pass', () => {
  it('killed after an apply and before its probe, restarted: the loop completes with no duplicate action', async () => {
    const node = 'K-1';
    await stack.fleet.writeDesired(node, 1, { version: '7.3' });
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    await gen1.terminate('next generation');
    const root = stack.fleet.root(node);
    const journal = path.join(root, '.datum/journal');
    const journalBefore = (await fs.readdir(journal)).length;

    // A real `datum worker` process on its own task queue, killed with SIGKILL the moment the
    // agent's journal shows the pass's last apply.
    const taskQueue = 'datum-control-crash';
    const worker = () => {
      const child = spawn(
        process.execPath,
        [
          path.join(projectRoot(), 'bin/datum.js'),
          'worker',
          '--fleet',
          stack.fleet.dir,
          '--data',
          stack.fleet.dir,
          '--address',
          stack.env.address,
          '--task-queue',
          taskQueue,
        ],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      children.push(child);
      return child;
    };
    await stack.fleet.writeDesired(node, 2, { version: '7.4', workers: 16 });
    const first = worker();
    const gen2 = await stack.startNode(node, 2, taskQueue);
    // Polled often: the worker is killed as soon as the third action is in the journal.
    await until(async () => (await fs.readdir(journal)).length >= journalBefore + 3, {
      what: 'the pass to apply its three actions',
      intervalMs: 5,
    });
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    expect((await gen2.describe()).status.name).toBe('RUNNING');

    worker();
    const state = await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    expect(state.desired_generation).toBe(2);
    const ledger = await gen2.query(ledgerQuery);
    const acted = ledger.filter((e) => e.execution_evidence.length > 0);
    expect(acted).toHaveLength(1);
    expect(acted[0].execution_evidence.map((e) => `${e.resource_key}:${e.outcome}`)).toEqual([
      'build:applied',
      'config:applied',
      'app:applied',
    ]);
    // Each action ran once on the node: exactly three new journal entries.
    expect((await fs.readdir(journal)).length).toBe(journalBefore + 3);
    expect(await fs.readFile(path.join(root, 'etc/app/config.json'), 'utf8')).toBe(fileBytes({ workers: 16 }));
    expect((await gen2.query(stateQuery)).conditions).toEqual([]);
    // The loop that finished is the run started for generation 2, not a new one: it reports its
    // own id, and the crash neither restarted nor continued it as another run.
    const expectedId = 'datum/K-1/gen-2';
    expect(reconcileWorkflowId(node, 2)).toBe(expectedId);
    expect(state.workflow_id).toBe(expectedId);
    const described = await gen2.describe();
    expect([described.workflowId, described.runId]).toEqual([expectedId, gen2.firstExecutionRunId]);
    expect(new Set(ledger.map((e) => e.workflow_id))).toEqual(new Set([expectedId]));
    // The store the killed worker and its successor share holds every entry of generation 2 once,
    // each under that id.
    const stored = (await stack.ledgerStore.list(node)).filter((e) => e.desired_generation === 2);
    expect(stored.map((e) => [e.workflow_id, e.seq])).toEqual(ledger.map((e) => [expectedId, e.seq]));
    await gen2.terminate('test done');
    await stack.recordHistory(gen2, 'controller-killed-mid-pass');
  });
});
