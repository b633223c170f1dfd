// Holes in the agent's side of a hand-over between generations (issue 10, the safety model;
// test/unit/node-model.ts `Holes` describes the first three), attacked on the real stack: a dev
// server, the controller worker, the agent, files on disk. In each, the old generation's loop is
// still running a pass when the new generation's loop reaches the node: a release artifact
// served slowly holds the old pass open, or the old loop is simply not handed over yet.

import { promises as fs } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { recheckSignal, reconcileWorkflowId, refreshDesiredSignal, resolveConflictSignal } from '../../src/contract';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { FAST_POLICY, startConflictingWriter } from '../helpers/fleet';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { useChildren } from '../helpers/processes';

const stack = useStack();
const children = useChildren();

const CONFIG = 'etc/app/config.json';
const configFile = (node: string) => path.join(stack.fleet.root(node), CONFIG);
const file = (workers: number) => ({ type: 'file', path: CONFIG, content: { workers } });
const flag = (value: boolean) => ({ type: 'flag', value });

async function writeDoc(node: string, generation: number, resources: Record<string, unknown>): Promise<void> {
  await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation, resources, policy: FAST_POLICY }));
}

async function agentFor(node: string): Promise<void> {
  await stack.fleet.writeAgent(node, { mode: 'enforce' });
  await stack.startAgent(node);
}

/** Hands the node's loop over to `generation`, as a rollout or `datum refresh` would. */
async function handOver(from: WorkflowHandle, node: string, generation: number): Promise<WorkflowHandle> {
  const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
  if (!read.ok) throw new Error(read.error);
  await from.signal(refreshDesiredSignal, { generation, digest: read.intent.digest });
  return stack.client.workflow.getHandle(reconcileWorkflowId(node, generation));
}

/**
 * Serves the 7.4 artifact slowly: the first bytes at once, then `during` runs while the agent is
 * fetching (the old generation's pass is open, its later actions not yet sent), the rest after.
 */
async function slowArtifact(during: () => Promise<void>): Promise<{ url: string; sha256: string; close: () => void }> {
  const art = await stack.fleet.artifact('7.4');
  const bytes = await fs.readFile(path.join(stack.fleet.dir, 'artifacts', art.name));
  let fired = false;
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/gzip' });
    res.write(bytes.subarray(0, 16));
    const first = !fired;
    fired = true;
    void (first ? during() : Promise.resolve()).then(() => setTimeout(() => res.end(bytes.subarray(16)), 300));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/${art.name}`;
  return { url, sha256: art.sha256, close: () => server.close() };
}

const release = (artifact: { url: string; sha256: string }, version = '7.4') => ({
  type: 'release',
  version,
  artifact: artifact.url,
  sha256: artifact.sha256,
});
const evidenceOf = (ledger: LedgerEntry[], key: string) =>
  ledger.flatMap((e) => e.execution_evidence.filter((ev) => ev.resource_key === key));
const decisionsOnDisk = async (node: string) =>
  JSON.parse(
    await fs.readFile(path.join(stack.fleet.root(node), '.datum/decisions.json'), 'utf8').catch(() => '{"targets":{}}'),
  ) as { targets: Record<string, { kind: string; generation: number; by: string }> };

describe("attack: the old loop's pass in flight writes after the new generation observed the node and had nothing to write", () => {
  it('is fenced by the new generation’s observe: the older write is refused, and the newer loop never has to repair it', async () => {
    const node = 'HF-1';
    // The file holds what generation 2 will ask for; generation 1 asks for workers 8.
    await fs.mkdir(path.dirname(configFile(node)), { recursive: true });
    await fs.writeFile(configFile(node), fileBytes({ workers: 2 }));
    let gen2: WorkflowHandle | undefined;
    // While generation 1 fetches its release (the first action of its batch, planned and sent
    // before generation 2 existed), generation 2 is bound, observes the node, and converges
    // without an action. Only then may generation 1's pass go on: its switch of `current`, then
    // its file write.
    const server = await slowArtifact(async () => {
      await writeDoc(node, 2, { config: file(2) });
      gen2 = await stack.startNode(node, 2);
      await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    });
    try {
      await agentFor(node);
      await writeDoc(node, 1, { build: release(server), config: file(8) });
      const gen1 = await stack.startNode(node, 1);

      await stack.waitFor(gen1, (_s, ledger) => evidenceOf(ledger, 'config').length > 0, 90_000);
      // The install had passed the fence before generation 2 observed; it is refused at the
      // switch itself, and the batch stops there: the file write is never sent.
      const [late] = evidenceOf(await stack.ledger(gen1), 'build');
      expect(late).toMatchObject({ outcome: 'refused', refusal_type: 'StaleGenerationRefusal' });
      expect(late?.detail).toContain(
        'it is for generation 1, but this agent already accepted generation 2 for node HF-1 (when its workflow observed the node)',
      );
      expect(evidenceOf(await stack.ledger(gen1), 'config')[0]).toMatchObject({ outcome: 'skipped' });
      // Nothing of generation 1 reached the node, so generation 2 never had anything to repair.
      await expect(fs.lstat(path.join(stack.fleet.root(node), 'current'))).rejects.toThrow(/ENOENT/);
      expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 2 }));
      await stack.waitForPass(gen2!, Date.now(), 2);
      expect((await stack.ledger(gen2!)).flatMap((e) => e.authorized_actions)).toEqual([]);
      expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 2 }));
      const fence = JSON.parse(await fs.readFile(path.join(stack.fleet.root(node), '.datum/fence.json'), 'utf8')) as {
        node: { generation: number; by?: string };
      };
      expect(fence.node).toMatchObject({ generation: 2, by: 'observe' });
      await Promise.all([gen1.terminate('test done'), gen2!.terminate('test done')]);
    } finally {
      server.close();
    }
  }, 180_000);
});

describe("attack: a hand-over renames the release resource, and the old loop's switch lands just before the new loop first observes", () => {
  it('is Datum’s own release under the old key: the new generation takes it as it is, converges without installing it again, never CONFLICT', async () => {
    const node = 'HF-2';
    const root = stack.fleet.root(node);
    const art = await stack.fleet.artifact('7.4');
    const build = release({ url: `artifacts/${art.name}`, sha256: art.sha256 });
    await agentFor(node);
    await writeDoc(node, 1, { build, config: file(8) });
    const gen1 = await stack.startNode(node, 1);
    // The moment generation 1's switch of `current` lands (its file write still to come), the
    // rollout binds generation 2, which calls the same release "app_release".
    await until(async () => (await fs.readlink(path.join(root, 'current')).catch(() => null)) !== null, {
      what: 'generation 1 to switch current',
    });
    await writeDoc(node, 2, { app_release: build, config: file(8) });
    const gen2 = await stack.startNode(node, 2);

    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED', 90_000);
    await stack.waitForPass(gen2, Date.now(), 2);
    const ledger = await stack.ledger(gen2);
    expect(ledger.map((e) => e.convergence_status)).not.toContain('CONFLICT');
    expect((await stack.state(gen2)).conditions.map((c) => c.type)).not.toContain('CONFLICTING_WRITER');
    // The release generation 1 switched under "build" is the one generation 2 wants: never installed twice.
    expect(ledger.flatMap((e) => e.authorized_actions).filter((a) => a.resource_key === 'app_release')).toEqual([]);
    expect(ledger[ledger.length - 1]?.resources.find((r) => r.resource_key === 'app_release')?.ownership).toBe('MANAGED');
    expect(await fs.readlink(path.join(root, 'current'))).toBe('releases/7.4');
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 8 }));
    await Promise.all([gen1.terminate('test done'), gen2.terminate('test done')]);
  }, 180_000);
});

describe("attack: the old loop's pass after a hand-over gives the agent back a yield the new generation's write had ended", () => {
  it('is refused by the fence and nothing is recorded: a later generation that reverts to the yielded spec repairs it', async () => {
    const node = 'HF-3';
    await agentFor(node);
    await writeDoc(node, 1, { config: file(8), maintenance: flag(false) });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    // A conflict, which the operator yields to the other writer.
    const writer = startConflictingWriter(configFile(node), fileBytes({ workers: 2 }));
    children.push(writer);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONFLICT');
    await gen1.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'yield', by: 'oncall' });
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    expect((await decisionsOnDisk(node)).targets[`file:${CONFIG}`]).toMatchObject({ kind: 'yield', generation: 1 });
    writer.kill('SIGKILL');

    // Generation 2 changes the file's value and, once the operator retakes it, writes it, which
    // ends the yield; the rollout started its loop before generation 1's loop handed over.
    await writeDoc(node, 2, { config: file(16), maintenance: flag(false) });
    const gen2 = await stack.startNode(node, 2);
    // A new value for a yielded target is the operator's to decide (issue 18, hole 5): the key is
    // UNKNOWN until then. The operator retakes it, and generation 2 writes the new value.
    await stack.waitFor(gen2, (s) => s.conditions.some((c) => c.type === 'UNKNOWN_OWNERSHIP' && c.resource_key === 'config'));
    await gen2.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'retake', by: 'oncall' });
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 16 }));
    expect((await decisionsOnDisk(node)).targets[`file:${CONFIG}`]).toBeUndefined();

    // Generation 1's loop runs one more pass: the agent no longer holds its yield, so it sends it.
    const before = (await stack.historyCounts(gen1)).scheduled.recordDecision ?? 0;
    await gen1.signal(recheckSignal, {});
    await until(async () => ((await stack.historyCounts(gen1)).scheduled.recordDecision ?? 0) > before, {
      what: 'generation 1 to send its yield again',
    });
    await stack.waitForPasses(gen1, 1);
    expect((await decisionsOnDisk(node)).targets[`file:${CONFIG}`]).toBeUndefined();
    // The refusal ends nothing in the old loop: it is still running, and did not spin on it.
    expect((await gen1.describe()).status.name).toBe('RUNNING');
    const counts = await stack.historyCounts(gen1);
    expect((counts.scheduled.recordDecision ?? 0) - before).toBeLessThan(10);
    await gen1.terminate('test done');

    // Generation 2 records a pass after generation 1's last (a repaired flag), so the ledger
    // store's newest entry is not the old loop's; then generation 3 goes back to workers 8, the
    // spec that was yielded. The yield was over: generation 3 repairs the file.
    await fs.writeFile(path.join(stack.fleet.root(node), 'flags/maintenance.json'), 'true\n');
    await stack.waitFor(gen2, (_s, ledger) => evidenceOf(ledger, 'maintenance').some((ev) => ev.outcome === 'applied'));
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    await writeDoc(node, 3, { config: file(8), maintenance: flag(false) });
    const gen3 = await handOver(gen2, node, 3);
    await stack.waitFor(gen3, (s) => s.convergence_status === 'CONVERGED' && s.desired_generation === 3);
    const ledger = await stack.ledger(gen3);
    expect(evidenceOf(ledger, 'config').map((ev) => ev.outcome)).toContain('applied');
    expect(ledger[ledger.length - 1]?.resources.find((r) => r.resource_key === 'config')?.ownership).toBe('MANAGED');
    expect(await fs.readFile(configFile(node), 'utf8')).toBe(fileBytes({ workers: 8 }));
    await gen3.terminate('test done');
  }, 240_000);
});

describe("attack: an old generation's release install passed the fence, and a newer generation observes the node while its fetch is in flight", () => {
  it("an old generation's slow release install finishes its fetch after the newer generation observed: current does not switch", async () => {
    const node = 'HF-4';
    const root = stack.fleet.root(node);
    const a73 = await stack.fleet.artifact('7.3');
    const v73 = release({ url: `artifacts/${a73.name}`, sha256: a73.sha256 }, '7.3');
    await agentFor(node);
    await writeDoc(node, 1, { build: v73 });
    const gen1 = await stack.startNode(node, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    expect(await fs.readlink(path.join(root, 'current'))).toBe('releases/7.3');

    // Generation 2 rolls 7.4 out; while the agent fetches it, the operator rolls back to 7.3
    // (generation 3), whose loop observes the node, finds 7.3 in place and converges.
    let gen3: WorkflowHandle | undefined;
    const server = await slowArtifact(async () => {
      await writeDoc(node, 3, { build: v73 });
      gen3 = await stack.startNode(node, 3);
      await stack.waitFor(gen3, (s) => s.convergence_status === 'CONVERGED');
    });
    try {
      await writeDoc(node, 2, { build: release(server) });
      const gen2 = await handOver(gen1, node, 2);

      await stack.waitFor(gen2, (_s, ledger) => evidenceOf(ledger, 'build').length > 0, 90_000);
      const [late] = evidenceOf(await stack.ledger(gen2), 'build');
      expect(late).toMatchObject({ outcome: 'refused', refusal_type: 'StaleGenerationRefusal', marker_after: null });
      expect(late?.detail).toContain(
        'it is for generation 2, but this agent already accepted generation 3 for node HF-4 (when its workflow observed the node)',
      );
      // The rolled-back release never went live; what was fetched stays unpacked, and nothing else.
      expect(await fs.readlink(path.join(root, 'current'))).toBe('releases/7.3');
      const record = JSON.parse(await fs.readFile(path.join(root, 'releases/7.4/.datum-release.json'), 'utf8')) as unknown;
      expect(record).toEqual({ version: '7.4', sha256: server.sha256 });
      expect(await fs.readdir(path.join(root, '.datum/pending')).catch(() => [])).toEqual([]);
      await gen2.terminate('test done');
      // Generation 3 never had to switch it back.
      await stack.waitForPass(gen3!, Date.now(), 2);
      expect((await stack.ledger(gen3!)).flatMap((e) => e.authorized_actions)).toEqual([]);
      expect(await fs.readlink(path.join(root, 'current'))).toBe('releases/7.3');
      await gen3!.terminate('test done');
    } finally {
      server.close();
    }
  }, 180_000);
});
