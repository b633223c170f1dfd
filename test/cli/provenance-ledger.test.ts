import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { reconcileWorkflowId } from '../../src/contract';
import type { LedgerEntry } from '../../src/domain';
import { runDatum } from '../helpers/cli';
import { useStack } from '../helpers/stack';

/*
 * Which commit of the desired state, by whom, each decision was made under (DESIGN.md's
 * desired_provenance: revision and author). The fleet directory is a real git checkout, each
 * generation a real commit by its own author; a real controller reads it, a real agent's loop
 * decides, and `datum ledger`, as a person runs it, shows each entry's commit and author.
 */

const stack = useStack();
const run = promisify(execFile);
const NODE = 'G-1';
const FILE = `desired/nodes/${NODE}.yaml`;
const ALICE = 'Alice Author <alice@example.com>';
const BOB = 'Bob Builder <bob@example.com>';

/** Commits the node's file as `author` (the committer is someone else), and returns the commit. */
async function commit(author: string, message: string): Promise<string> {
  const [, name, email] = /^(.*) <(.*)>$/.exec(author)!;
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: name,
    GIT_AUTHOR_EMAIL: email,
    GIT_COMMITTER_NAME: 'Carol Committer',
    GIT_COMMITTER_EMAIL: 'carol@example.com',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_CONFIG_NOSYSTEM: '1',
  };
  const git = async (...args: string[]) => (await run('git', ['-C', stack.fleet.dir, ...args], { env })).stdout.trim();
  await git('add', '--', FILE);
  await git('commit', '-q', '-m', message, '--', FILE);
  return git('rev-parse', 'HEAD');
}

const datum = (...args: string[]) =>
  runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir, DATUM_DATA: stack.fleet.dir });

describe('the desired state commit and author reach the ledger', () => {
  it('each entry names the commit and author of the generation it was decided under, in datum ledger', async () => {
    await run('git', ['init', '-q', '-b', 'main', stack.fleet.dir]);
    await stack.fleet.writeDesired(NODE, 1, { workers: 4 });
    const first = await commit(ALICE, 'G-1 at generation 1');
    await stack.fleet.writeAgent(NODE, { mode: 'enforce' });
    await stack.startAgent(NODE);
    const gen1 = await stack.startNode(NODE, 1);
    await stack.waitFor(gen1, (s) => s.convergence_status === 'CONVERGED');

    await stack.fleet.writeDesired(NODE, 2, { workers: 16 });
    const second = await commit(BOB, 'G-1 at generation 2: 16 workers');
    const refreshed = await datum('refresh', NODE);
    expect(refreshed.code, refreshed.stderr).toBe(0);
    const gen2 = stack.client.workflow.getHandle(reconcileWorkflowId(NODE, 2));
    await stack.waitFor(gen2, (s) => s.convergence_status === 'CONVERGED');

    const shown = await datum('ledger', NODE, '-o', 'json');
    expect(shown.code, shown.stderr).toBe(0);
    const entries = JSON.parse(shown.stdout) as LedgerEntry[];
    const byGeneration = (g: number) => entries.filter((e) => e.desired_generation === g).map((e) => e.desired_provenance);
    expect(byGeneration(1).length).toBeGreaterThan(0);
    expect(byGeneration(2).length).toBeGreaterThan(0);
    for (const p of byGeneration(1)) expect(p).toMatchObject({ source: FILE, revision: `git:${first}`, author: ALICE });
    for (const p of byGeneration(2)) expect(p).toMatchObject({ source: FILE, revision: `git:${second}`, author: BOB });
    // The repair itself is recorded under Bob's commit: who asked for the change it made.
    const repair = entries.find((e) => e.desired_generation === 2 && e.authorized_actions.length > 0)!;
    expect(repair.desired_provenance).toMatchObject({ revision: `git:${second}`, author: BOB });

    // The table a person reads names them too.
    const table = await datum('ledger', NODE);
    expect(table.stdout).toContain(`git:${second.slice(0, 12)}`);
    expect(table.stdout).toContain('Bob Builder');
    await gen2.terminate('test done');
  });
});
