import { promises as fs } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { D7, health } from '../helpers/service-health';
import { useStack } from '../helpers/stack';

/*
 * A service killed on the node comes back because the loop restarts it, and the loop says so only
 * once the new process answers with the desired build: a real dev server, the real controller,
 * a real agent and the real demo service, killed with SIGKILL as a crash or an OOM kill would.
 */

const stack = useStack();

/** Whether `pid` still runs (a zombie or a reaped pid does not). */
async function runs(pid: number): Promise<boolean> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  return stat !== null && !/^\d+ \(.*\) [ZX] /.test(stat);
}

describe('a killed service', () => {
  it('is restarted by the loop: CONVERGED_AFTER_REPAIR with a new pid that reports the desired build', async () => {
    const node = 'K-1';
    const root = stack.fleet.root(node);
    await stack.fleet.writeDesired(node, 1, { version: '7.4' });
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const before = await health(root);
    expect(before).toMatchObject({ build: '7.4', config_sha256: D7 });
    const lastSeq = Math.max(...(await stack.ledger(handle)).map((e) => e.seq));

    process.kill(before.pid, 'SIGKILL');
    await expect.poll(() => runs(before.pid)).toBe(false);

    // The loop notices (the watch, or the next resync), starts the service and proves it.
    const state = await stack.waitFor(handle, (_s, ledger) =>
      ledger.some((e) => e.seq > lastSeq && e.reason === 'CONVERGED_AFTER_REPAIR'),
    );
    const after = (await stack.ledger(handle)).filter((e) => e.seq > lastSeq);
    const repair = after.find((e) => e.reason === 'CONVERGED_AFTER_REPAIR')!;
    expect(repair.convergence_status).toBe('CONVERGED');
    expect(repair.authorized_actions.map((a) => `${a.resource_key}:${a.action}`)).toEqual(['app:service.start']);
    expect(repair.execution_evidence.map((e) => e.outcome)).toEqual(['applied']);
    // Nothing else was touched: the release, the config and the flag were right all along.
    expect(after.flatMap((e) => e.authorized_actions.map((a) => a.resource_key))).toEqual(['app']);
    expect(['CONVERGED_AFTER_REPAIR', 'ALREADY_CONVERGED']).toContain(state.reason);

    // Proof from the thing itself: another process, answering the desired build and config.
    const now = await health(root);
    expect(now.pid).not.toBe(before.pid);
    expect(await runs(now.pid)).toBe(true);
    expect(now).toMatchObject({ build: '7.4', config_sha256: D7 });
    await handle.terminate('test done');
  });
});
