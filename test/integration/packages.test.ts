import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { workItemId, workItemQuery, type WorkItem } from '../../src/contract';
import type { LedgerEntry } from '../../src/domain';
import { projectRoot } from '../../src/worker/paths';
import { confinedApt, dpkgIn, dpkgUnavailable, emptyDpkgRoot, hostDpkgUntouched, queryIn } from '../helpers/dpkg';
import { FAST_POLICY, MAINTENANCE } from '../helpers/fleet';
import { useChildren } from '../helpers/processes';
import { statusesOf, useStack } from '../helpers/stack';
import { until } from '../helpers/until';

/*
 * The package type end to end: a real dev server, the real controller, real agents, and the real
 * dpkg of this host on a confined database per node (agent.yaml's packages.root, a directory
 * beside the node root). Converge, drift and repair, observe mode, an operator's override, another
 * writer, an obstruction only a removal could clear, the apt path, and the seed's probe 4 with a
 * real dpkg behaviour (the host's refuse-downgrade). The machine's own packages are never touched.
 */

const stack = useStack();
const children = useChildren();

const NAME = 'dtest-hello';
let hostCheck: () => Promise<void>;
beforeAll(async () => {
  hostCheck = await hostDpkgUntouched(/dtest-/);
});
afterAll(async () => {
  await hostCheck?.();
});

const dpkgRootOf = (node: string) => path.join(stack.fleet.dir, 'dpkg', node);

/** A .deb in the fleet's artifacts/, as desired state names it. */
async function deb(
  name: string,
  version: string,
  relations?: Record<string, string>,
): Promise<{ artifact: string; sha256: string; file: string }> {
  const { buildDeb } = await import('../../scripts/build-deb.mjs');
  const built = await buildDeb({ name, version, relations, outDir: path.join(stack.fleet.dir, 'artifacts') });
  return { artifact: `artifacts/${path.basename(built.file)}`, sha256: built.sha256, file: built.file };
}

interface AgentYaml {
  mode?: 'observe' | 'enforce';
  overrides?: Record<string, typeof MAINTENANCE>;
  from?: ('artifact' | 'apt')[];
  aptConfig?: string;
}

/** agent.yaml allowing dtest-* packages into the node's own dpkg root (beside its node root). */
async function writeAgent(node: string, o: AgentYaml = {}): Promise<void> {
  const doc = {
    node,
    root: stack.fleet.root(node),
    reconciliation: { mode: o.mode ?? 'enforce' },
    overrides: o.overrides ?? {},
    allow: { packages: [{ name: 'dtest-*', from: o.from ?? ['artifact'] }] },
    packages: { root: dpkgRootOf(node), ...(o.aptConfig ? { apt_config: o.aptConfig } : {}) },
  };
  await fs.writeFile(stack.fleet.agentFile(node), stringify(doc));
}

async function writeDesired(node: string, generation: number, resources: Record<string, unknown>, policy = {}): Promise<void> {
  await fs.writeFile(
    stack.fleet.desiredFile(node),
    stringify({ node, generation, resources, policy: { ...FAST_POLICY, ...policy } }),
  );
}

const hello = (version: string, built?: { artifact: string; sha256: string }) => ({
  type: 'package',
  name: NAME,
  version,
  ...(built ? { artifact: built.artifact, sha256: built.sha256 } : {}),
});

/** A node with its own empty dpkg root, dtest-hello installed there by hand at `installed` if given. */
async function node(name: string, installed?: string): Promise<string> {
  const root = await emptyDpkgRoot(dpkgRootOf(name));
  if (installed) expect(dpkgIn(root, ['--install', (await deb(NAME, installed)).file]).status).toBe(0);
  return root;
}

const acted = (ledger: LedgerEntry[]) => ledger.filter((e) => e.execution_evidence.length > 0 || e.authorized_actions.length > 0);
const dpkgLog = (root: string) => fs.readFile(path.join(root, 'var/log/dpkg.log'), 'utf8').catch(() => '');

describe.skipIf(dpkgUnavailable())('package resources on a real loop and the real dpkg', () => {
  it('converges from a .deb, repairs a version installed by hand, and never removes the package once desired state drops it', async () => {
    const n = 'PK-1';
    const root = await node(n);
    const v11 = await deb(NAME, '1.1-1');
    // conflict_window 0s: a hand install after convergence is ordinary drift here, not a writer
    // flipping a repair. resync 10m: only the watch on dpkg's database (its baseline is the last
    // observation's markers) can see it within the test.
    await writeDesired(n, 1, { hello: hello('1.1-1', v11) }, { conflict_window: '0s', resync_interval: '10m' });
    await writeAgent(n);
    await stack.startAgent(n);
    const gen1 = await stack.startNode(n, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    expect(queryIn(root, NAME)).toEqual({ version: '1.1-1', abbrev: 'ii ' });
    const first = acted(await stack.ledger(gen1));
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({ convergence_status: 'CONVERGED', reason: 'CONVERGED_AFTER_REPAIR' });
    expect(first[0].execution_evidence[0]).toMatchObject({
      resource_key: 'hello',
      action: 'package.install',
      outcome: 'applied',
    });
    // CONVERGED from the fresh observation of dpkg's database, whose marker is the one the install left.
    expect(first[0].post_action_observation).toMatchObject({
      resources: {
        hello: {
          value: { version: '1.1-1', status: 'installed' },
          marker: first[0].execution_evidence[0].marker_after,
          drift: false,
        },
      },
    });

    // Someone installs 2.0-1 by hand with dpkg on the same database: drift, repaired in enforce.
    const changedAt = Date.now();
    expect(dpkgIn(root, ['--install', (await deb(NAME, '2.0-1')).file]).status).toBe(0);
    await stack.waitFor(gen1, (s, ledger) =>
      ledger.some((e) => Date.parse(e.decided_at) > changedAt && e.reason === 'CONVERGED_AFTER_REPAIR'),
    );
    expect(queryIn(root, NAME)).toEqual({ version: '1.1-1', abbrev: 'ii ' });
    const repair = acted(await stack.ledger(gen1)).at(-1)!;
    expect(repair.resources.find((r) => r.resource_key === 'hello')).toMatchObject({
      ownership: 'MANAGED',
      observed: { version: '2.0-1', status: 'installed' },
      drift: true,
    });
    await gen1.terminate('next generation');

    // Generation 2 no longer declares the package: it stays installed (removal is never a repair).
    await writeDesired(n, 2, { maintenance: { type: 'flag', value: false } });
    const gen2 = await stack.startNode(n, 2);
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');
    expect(queryIn(root, NAME)).toEqual({ version: '1.1-1', abbrev: 'ii ' });
    expect((await stack.ledger(gen2)).flatMap((e) => e.authorized_actions.map((a) => a.action))).toEqual(['flag.write']);
    await gen2.terminate('test done');
  });

  it("probe 4: dpkg exits 0 and still reports the old version (the host's refuse-downgrade): RETRY / ACTION_INEFFECTIVE, then BLOCKED / RETRY_BUDGET_EXHAUSTED, never CONVERGED", async () => {
    const n = 'PK-4';
    const root = await node(n, '2.0-1');
    // The host's own dpkg configuration, read by the agent's dpkg: $HOME/.dpkg.cfg of the agent's user.
    const home = path.join(stack.fleet.dir, 'home-PK-4');
    await fs.mkdir(home);
    await fs.writeFile(path.join(home, '.dpkg.cfg'), 'refuse-downgrade\n');
    await writeDesired(n, 1, { hello: hello('1.1-1', await deb(NAME, '1.1-1')) }, { retry_budget: 2 });
    await writeAgent(n);
    // A real `datum agent` process, as a host runs it, with that HOME.
    const bin = path.join(projectRoot(), 'bin/datum.js');
    const agent = spawn(process.execPath, [bin, 'agent', '--config', stack.fleet.agentFile(n), '--address', stack.env.address], {
      env: { ...process.env, HOME: home },
      cwd: stack.fleet.dir,
      stdio: 'ignore',
    });
    children.push(agent);

    const gen1 = await stack.startNode(n, 1);
    const state = await stack.waitFor(gen1, (s) => s.convergence_status === 'BLOCKED', 90_000);
    expect(state).toMatchObject({ reason: 'RETRY_BUDGET_EXHAUSTED', attempt_count: 2 });
    const ledger = await stack.ledger(gen1);
    expect(statusesOf(ledger)).toEqual(['RETRY/ACTION_INEFFECTIVE', 'BLOCKED/RETRY_BUDGET_EXHAUSTED']);
    expect(statusesOf(ledger).some((s) => s.startsWith('CONVERGED'))).toBe(false);
    for (const entry of ledger) {
      const [ev] = entry.execution_evidence;
      // The installer's exit code is execution evidence only: applied, exit 0, dpkg's own words.
      expect(ev).toMatchObject({ action: 'package.install', outcome: 'applied' });
      expect(ev.detail).toMatch(
        /dpkg exited 0 \(".*will not downgrade dtest-hello from 2\.0-1 to 1\.1-1, skipping"\), and dpkg's database now reports dtest-hello 2\.0-1 installed\./,
      );
      // ...and the fresh probe reads dpkg's database: the old version, under the marker our own run left (not another writer).
      expect(entry.post_action_observation).toMatchObject({
        resources: { hello: { value: { version: '2.0-1', status: 'installed' }, marker: ev.marker_after, drift: true } },
      });
      expect(entry.conflicting_writer_evidence).toBeNull();
    }
    expect(queryIn(root, NAME)).toEqual({ version: '2.0-1', abbrev: 'ii ' });
    await gen1.terminate('test done');
  });

  it('in observe mode reports the drift with the plan, and dpkg is not run', async () => {
    const n = 'PK-O';
    const root = await node(n, '1.0-1');
    const logged = await dpkgLog(root);
    await writeDesired(n, 1, { hello: hello('1.1-1', await deb(NAME, '1.1-1')) });
    await writeAgent(n, { mode: 'observe' });
    await stack.startAgent(n);
    const gen1 = await stack.startNode(n, 1);
    const state = await stack.waitFor(gen1, (s) => s.convergence_status === 'DRIFTED');
    expect(state.reason).toBe('OBSERVE_MODE_DRIFT');
    await stack.waitForPass(gen1, Date.now(), 2);
    const ledger = await stack.ledger(gen1);
    expect(ledger.flatMap((e) => e.execution_evidence)).toEqual([]);
    expect(ledger.flatMap((e) => e.authorized_actions)).toEqual([]);
    expect(queryIn(root, NAME)).toEqual({ version: '1.0-1', abbrev: 'ii ' });
    expect(await dpkgLog(root)).toBe(logged);
    await gen1.terminate('test done');
  });

  it('an override of "package:dtest-hello" in agent.yaml makes it OPERATOR_OWNED: recorded, never installed over', async () => {
    const n = 'PK-V';
    const root = await node(n, '1.0-1');
    const logged = await dpkgLog(root);
    await writeDesired(n, 1, { hello: hello('1.1-1', await deb(NAME, '1.1-1')) });
    await writeAgent(n, { overrides: { [`package:${NAME}`]: MAINTENANCE } });
    await stack.startAgent(n);
    const gen1 = await stack.startNode(n, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    await stack.waitForPass(gen1, Date.now(), 2);
    const ledger = await stack.ledger(gen1);
    const last = ledger.at(-1)!;
    expect(last.resources.find((r) => r.resource_key === 'hello')).toMatchObject({ ownership: 'OPERATOR_OWNED' });
    expect(last.operator_exceptions.map((e) => e.resource_key)).toEqual(['hello']);
    expect(acted(ledger)).toEqual([]);
    expect(queryIn(root, NAME)).toEqual({ version: '1.0-1', abbrev: 'ii ' });
    expect(await dpkgLog(root)).toBe(logged);
    await gen1.terminate('test done');
  });

  it('another writer that keeps installing its own version after the repair: CONFLICT with its sightings as evidence', async () => {
    const n = 'PK-C';
    const root = await node(n);
    const theirs = await deb(NAME, '2.0-1');
    await writeDesired(n, 1, { hello: hello('1.1-1', await deb(NAME, '1.1-1')) });
    await writeAgent(n);
    await stack.startAgent(n);
    const gen1 = await stack.startNode(n, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');

    // A real process on the same database, putting 2.0-1 back whenever it is not there.
    const script = `while :; do v=$(dpkg-query --root="$1" -W -f='\${Version}' ${NAME} 2>/dev/null); [ "$v" = 2.0-1 ] || dpkg --root="$1" --log="$1/var/log/dpkg.log" --install "$2" >/dev/null 2>&1 </dev/null; sleep 0.2; done`;
    const writer: ChildProcess = spawn('sh', ['-c', script, 'writer', root, theirs.file], {
      env: { ...process.env, PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
      stdio: 'ignore',
    });
    children.push(writer);
    const conflict = await stack.waitFor(gen1, (s) => s.convergence_status === 'CONFLICT');
    expect(conflict).toMatchObject({ reason: 'CONFLICTING_WRITER', recheck_trigger: { trigger: 'OPERATOR_RESOLUTION' } });
    expect(conflict.conditions.map((c) => [c.type, c.resource_key])).toEqual([['CONFLICTING_WRITER', 'hello']]);
    const entry = (await stack.ledger(gen1)).find((e) => e.convergence_status === 'CONFLICT')!;
    const evidence = entry.conflicting_writer_evidence!.find((e) => e.resource_key === 'hello')!;
    expect(evidence.sequence.map((s) => s.value)).toContainEqual({ version: '1.1-1', status: 'installed' });
    expect(evidence.sequence.at(-1)!.value).toEqual({ version: '2.0-1', status: 'installed' });
    expect(new Set(evidence.sequence.map((s) => s.marker)).size).toBeGreaterThan(1);
    // Repair stops: passes judge the conflict and Datum installs nothing more.
    const before = acted(await stack.ledger(gen1)).length;
    await stack.waitForPass(gen1, Date.now(), 2);
    expect(acted(await stack.ledger(gen1))).toHaveLength(before);
    writer.kill('SIGKILL');
    await gen1.terminate('test done');
  });

  it('an installed package that conflicts with the desired one: BLOCKED / DESTRUCTIVE_REPAIR_REQUIRED and a work item; removing it by hand lets Datum converge and closes the item', async () => {
    const n = 'PK-D';
    const root = await node(n);
    const legacy = await deb('dtest-legacy', '1.0-1', { conflicts: `${NAME} (<< 2.0)` });
    expect(dpkgIn(root, ['--install', legacy.file]).status).toBe(0);
    await writeDesired(n, 1, { hello: hello('1.1-1', await deb(NAME, '1.1-1')) });
    await writeAgent(n);
    await stack.startAgent(n);
    const gen1 = await stack.startNode(n, 1);
    const blocked = await stack.waitFor(gen1, (s) => s.convergence_status === 'BLOCKED');
    expect(blocked).toMatchObject({ reason: 'DESTRUCTIVE_REPAIR_REQUIRED' });
    expect(blocked.conditions).toMatchObject([
      { type: 'DESTRUCTIVE_REPAIR_REQUIRED', resource_key: 'hello', needs_judgement: true },
    ]);
    const [planned] = (await stack.ledger(gen1)).at(-1)!.planned_actions;
    expect(planned).toMatchObject({ action: 'package.install', destructive: true, authorized: false });
    expect(planned.withheld_because).toMatch(/installing dtest-hello 1\.1-1 would push out dtest-legacy 1\.0-1/);
    const id = workItemId(n, 'DESTRUCTIVE_REPAIR_REQUIRED', 'hello');
    const item = await until(() => stack.client.workflow.getHandle(id).query(workItemQuery), {
      what: `work item ${id}`,
      accept: (w: WorkItem) => w.state === 'OPEN' || w.state === 'ESCALATED',
      errors: 'retry',
    });
    expect(item.message).toMatch(
      /dtest-legacy 1\.0-1 \(it declares Conflicts: dtest-hello \(<< 2\.0\): dpkg makes room only by removing it\)/,
    );
    expect(item.allowed.map((a) => a.resolution)).toEqual(['approve', 'decline']);
    expect(acted(await stack.ledger(gen1))).toEqual([]);
    expect(queryIn(root, 'dtest-legacy')).toEqual({ version: '1.0-1', abbrev: 'ii ' });

    // The operator decides dtest-legacy goes, and removes it by hand: the next observation clears it.
    expect(dpkgIn(root, ['--remove', 'dtest-legacy']).status).toBe(0);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    expect(queryIn(root, NAME)).toEqual({ version: '1.1-1', abbrev: 'ii ' });
    const closed = (await stack.client.workflow.getHandle(id).result()) as WorkItem;
    expect(closed.state).toBe('CLOSED');
    await gen1.terminate('test done');
  });

  it("installs an exact version from the host's apt sources (a flat repository, APT_CONFIG confined)", async () => {
    const n = 'PK-A';
    const root = await node(n, '1.0-1');
    const repo = path.join(stack.fleet.dir, 'repo-PK-A');
    await fs.mkdir(repo);
    for (const version of ['1.0-1', '1.1-1', '2.0-1']) {
      const built = await deb(NAME, version);
      await fs.copyFile(built.file, path.join(repo, path.basename(built.file)));
    }
    const aptDir = path.join(stack.fleet.dir, 'apt-PK-A');
    const aptConfig = await confinedApt(aptDir, repo, root);
    await writeDesired(n, 1, { hello: hello('1.1-1') });
    await writeAgent(n, { from: ['apt'], aptConfig });
    await stack.startAgent(n);
    const gen1 = await stack.startNode(n, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');
    expect(queryIn(root, NAME)).toEqual({ version: '1.1-1', abbrev: 'ii ' });
    const [ev] = acted(await stack.ledger(gen1))[0].execution_evidence;
    expect(ev.detail).toMatch(new RegExp(`^ran apt-get install ${NAME}=1\\.1-1 with APT_CONFIG=${aptConfig}; apt-get exited 0`));
    // apt's own record of it is in the confined log directory APT_CONFIG names.
    const history = await fs.readFile(path.join(aptDir, 'log/history.log'), 'utf8');
    expect(history).toMatch(
      /Commandline: apt-get -q -y --no-remove --allow-downgrades .* install -- dtest-hello=1\.1-1\nUpgrade: dtest-hello:amd64 \(1\.0-1, 1\.1-1\)/,
    );
    await gen1.terminate('test done');
  });
});
