// Issue 18, suspected from the code: a desired state published with a mistyped huge generation
// (100000000 for 10) fences the node for good. Once that generation's loop has observed the
// node, the agent refuses every write of 11, 12, … (StaleGenerationRefusal), and there was no
// recorded way back. On the real stack (a dev server, the controller worker, the real agent on
// a real root) and the real `datum` command as a child process: `datum agent reset-fence` moves
// the fence back, refuses what it must, and the reset is in the node's log and in the ledger.

import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { recheckSignal } from '../../src/contract';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { FAST_POLICY } from '../helpers/fleet';
import { Stack } from '../helpers/stack';
import { DATUM } from '../helpers/cli';

const run = promisify(execFile);
const HUGE = 100_000_000;

let stack: Stack;
beforeAll(async () => {
  stack = await Stack.start();
  await stack.startController();
});
afterAll(async () => {
  await stack?.stop();
});

const CONFIG = 'etc/app/config.json';
const node = 'HG-1';
const root = () => stack.fleet.root(node);
const datumFile = (name: string) => path.join(root(), '.datum', name);

async function writeDoc(generation: number, workers: number): Promise<void> {
  const resources = { config: { type: 'file', path: CONFIG, content: { workers } } };
  await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation, resources, policy: FAST_POLICY }));
}

interface Fence {
  node: { generation: number; by?: string };
  reset?: { at: string; by: string; reason: string; from: number; to: number };
}
const fence = async () => JSON.parse(await fs.readFile(datumFile('fence.json'), 'utf8')) as Fence;
const resetLog = async () =>
  (await fs.readFile(datumFile('fence-resets.jsonl'), 'utf8').catch(() => ''))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as NonNullable<Fence['reset']>);

/** `datum agent reset-fence ARGS…` as a process of its own, as an operator on the node runs it. */
async function resetFence(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [DATUM, 'agent', 'reset-fence', ...args]);
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

const refusalsOf = (ledger: LedgerEntry[]) =>
  ledger.flatMap((e) => e.execution_evidence.filter((ev) => ev.outcome === 'refused').map((ev) => ev.refusal_type));

describe('a generation published by mistake: 100000000 for 10', () => {
  it('fences the node; the refusal names `datum agent reset-fence` and where, that command moves the fence back, recorded, and generation 11 converges', async () => {
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);

    // 1. The mistaken generation's loop observes (and converges) the node: the fence is at it.
    await writeDoc(HUGE, 8);
    const huge = await stack.startNode(node, HUGE);
    await stack.waitFor(huge, (s) => s.convergence_status === 'CONVERGED');
    expect((await fence()).node.generation).toBe(HUGE);
    // The operator ends the mistaken loop, and publishes the right generation.
    await huge.terminate('generation 100000000 was published by mistake');

    // 2. Generation 11 is refused by the fence: its write never lands.
    await writeDoc(11, 11);
    const gen11 = await stack.startNode(node, 11);
    await stack.waitFor(gen11, (_s, ledger) => refusalsOf(ledger).includes('StaleGenerationRefusal'));
    expect(await fs.readFile(path.join(root(), CONFIG), 'utf8')).toBe(fileBytes({ workers: 8 }));

    // The refusal's condition names the procedure, and where: the command below is the one it names.
    const refused = (await stack.state(gen11)).conditions.find((c) => c.type === 'ACTION_REFUSED')!;
    expect(refused.message).toContain(`if ${HUGE} was published by mistake, end that generation's loop, then on ${node} itself`);
    const named = /with its agent stopped, run datum agent reset-fence (.*?) \(docs\/operations\.md/.exec(refused.message);
    expect(named?.[1]).toBe(`--node ${node} --to 11 --by WHO --reason WHY`);
    const config = stack.fleet.agentFile(node);
    const said = { WHO: 'oncall', WHY: 'typo: 100000000 for 10' } as Record<string, string>;
    const good = ['--config', config, ...named![1].split(' ').map((w) => said[w] ?? w)];

    // 3. While the agent serves the root, the reset is refused: the agent holds the root's kernel lock.
    const running = await resetFence(...good);
    expect(running.code).toBe(1);
    expect(running.stderr).toContain(`is held by an agent (pid ${process.pid}, node ${node}, since`);
    expect(running.stderr).toContain(`— fix: stop the agent of node ${node} first`);
    expect((await fence()).node.generation).toBe(HUGE);

    await stack.stopAgent(node);

    // 4. Bad inputs: each gets its own error with a fix, and nothing moves.
    const bad: Array<{ args: string[]; code: number; says: string }> = [
      {
        args: ['--config', config, '--node', node, '--to', String(HUGE), '--by', 'oncall', '--reason', 'r'],
        code: 1,
        says: `--to ${HUGE} is not below the fence of node ${node}, which is at generation ${HUGE} — fix: give --to below ${HUGE}`,
      },
      {
        args: ['--config', config, '--node', node, '--to', String(HUGE + 1), '--by', 'oncall', '--reason', 'r'],
        code: 1,
        says: `is not below the fence of node ${node}, which is at generation ${HUGE}`,
      },
      {
        args: ['--config', config, '--node', node, '--to', '10.5', '--by', 'oncall', '--reason', 'r'],
        code: 2,
        says: '--to must be a whole number of 1 or more, got "10.5" — fix: such as --to 10',
      },
      {
        args: ['--config', config, '--node', node, '--to', 'ten', '--by', 'oncall', '--reason', 'r'],
        code: 2,
        says: '--to must be a whole number of 1 or more, got "ten"',
      },
      {
        args: ['--config', config, '--node', 'HG-404', '--to', '10', '--by', 'oncall', '--reason', 'r'],
        code: 1,
        says: `is the agent.yaml of node ${node}, not of node HG-404 — fix: give --node ${node}`,
      },
      {
        args: ['--config', config, '--node', node, '--to', '10', '--reason', 'r'],
        code: 2,
        says: '--by is required: a reset of the fence is recorded with it — fix: such as --by oncall',
      },
      {
        args: ['--config', config, '--node', node, '--to', '10', '--by', 'oncall'],
        code: 2,
        says: '--reason is required: a reset of the fence is recorded with it — fix: such as --reason',
      },
      {
        args: ['--config', config, '--node', node, '--to', '10', '--by', '  ', '--reason', 'r'],
        code: 2,
        says: '--by is required',
      },
    ];
    for (const b of bad) {
      const out = await resetFence(...b.args);
      expect({ args: b.args, code: out.code }).toEqual({ args: b.args, code: b.code });
      expect(out.stderr).toContain(b.says);
    }
    expect((await fence()).node.generation).toBe(HUGE);
    expect(await resetLog()).toEqual([]);

    // 5. The reset the condition named: the fence is at 11, and the reset is recorded on the node.
    const done = await resetFence(...good);
    expect(done).toMatchObject({ code: 0, stderr: '' });
    expect(done.stdout).toContain(`node ${node}: fence moved from generation ${HUGE} to 11 by oncall`);
    const recorded = { by: 'oncall', reason: 'typo: 100000000 for 10', from: HUGE, to: 11 };
    expect(await resetLog()).toEqual([expect.objectContaining(recorded)]);
    expect(await fence()).toMatchObject({ node: { generation: 11, by: 'reset' }, reset: recorded });
    await expect(fs.lstat(datumFile('holder.json'))).rejects.toThrow(/ENOENT/);

    // 6. With the agent back, generation 11 converges, and its ledger records the reset.
    await stack.startAgent(node);
    await gen11.signal(recheckSignal, {});
    const converged = await stack.waitFor(gen11, (s) => s.convergence_status === 'CONVERGED', 90_000);
    expect(converged.desired_generation).toBe(11);
    expect(await fs.readFile(path.join(root(), CONFIG), 'utf8')).toBe(fileBytes({ workers: 11 }));
    expect((await fence()).node.generation).toBe(11);
    const ledger = await stack.ledger(gen11);
    const acted = ledger.filter((e) => e.execution_evidence.some((ev) => ev.outcome === 'applied'));
    expect(acted.length).toBeGreaterThan(0);
    for (const entry of acted) expect(entry.fence_reset).toMatchObject(recorded);
    // The entries from before the reset carry none.
    expect(ledger.filter((e) => refusalsOf([e]).includes('StaleGenerationRefusal')).map((e) => e.fence_reset)).toEqual(
      expect.arrayContaining([undefined]),
    );
    // The ledger store holds the same (entries reach it a moment after the loop decides them).
    await expect
      .poll(async () => (await stack.ledgerStore.list(node)).filter((e) => e.desired_generation === 11 && e.fence_reset))
      .not.toEqual([]);
    const stored = (await stack.ledgerStore.list(node)).filter((e) => e.fence_reset);
    for (const entry of stored) expect(entry.fence_reset).toMatchObject(recorded);
    await gen11.terminate('test done');
  }, 240_000);
});
