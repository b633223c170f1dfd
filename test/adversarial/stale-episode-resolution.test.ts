import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileBytes } from '../../src/domain';
import { workItemId, workItemQuery, type WorkItem } from '../../src/contract';
import { episodeToken } from '../../src/cli/work';
import { runDatum } from '../helpers/cli';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';

/*
 * A resolver is shown episode 1 of a condition (its evidence), and the condition clears and comes
 * back as episode 2, a drift the resolver never saw. A resolution judged on episode 1 is refused
 * on episode 2, naming the change; it is recorded only on the episode it was judged on.
 */

const stack = useStack();
const datum = (...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir });

async function item(id: string): Promise<WorkItem> {
  const handle = stack.client.workflow.getHandle(id);
  const { status } = await handle.describe();
  return status.name === 'RUNNING' ? handle.query(workItemQuery) : ((await handle.result()) as WorkItem);
}

describe('a resolution judged on one episode', () => {
  it('is refused on the next one, and recorded only on the episode it was judged on', async () => {
    const node = 'EP-1';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const loop = await stack.startNode(node, 1);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    // The operator keeps config observe-only: its drift is reported, and a judgement asked for.
    await stack.fleet.writeAgent(node, { mode: 'enforce', resources: { config: 'observe' } });
    const config = path.join(stack.fleet.root(node), 'etc/app/config.json');
    const id = workItemId(node, 'OBSERVED_DRIFT', 'config');

    // Episode 1: a drift the resolver is shown, and claims.
    await fs.writeFile(config, fileBytes({ workers: 2 }));
    const one = await until(() => item(id), { what: `${id} open`, accept: (i) => i.state === 'OPEN', errors: 'retry' });
    const shown = await datum('work', 'show', id);
    expect(shown.stdout).toContain(`episode: ${episodeToken(one.episode!)}`);
    expect((await datum('work', 'claim', id, '--by', 'alice')).code).toBe(0);

    // It clears (episode 1 closes) and comes back with another value: episode 2, a new run.
    await fs.writeFile(config, fileBytes({ workers: 8 }));
    await until(() => item(id), { what: `${id} closed`, accept: (i) => i.state === 'CLOSED', errors: 'retry' });
    await fs.writeFile(config, fileBytes({ workers: 64 }));
    const two = await until(() => item(id), {
      what: `${id} open again`,
      accept: (i) => i.state === 'OPEN' && i.episode?.run_id !== one.episode!.run_id,
      errors: 'retry',
    });

    // The hold judged on episode 1 is refused on episode 2, and says why.
    const stale = await datum(
      'work',
      'resolve',
      id,
      '--resolution',
      'hold',
      '--by',
      'alice',
      '--episode',
      episodeToken(one.episode!),
    );
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/is a new episode since you judged it: the condition cleared and came back .*— fix: look again/);
    expect((await item(id)).resolutions).toEqual([]);
    const ledger = await stack.ledger(loop);
    expect(ledger.filter((e) => e.reason === 'OPERATOR_RESOLUTION_RECORDED')).toEqual([]);

    // Judged on what it shows now, it is recorded.
    const fresh = await datum(
      'work',
      'resolve',
      id,
      '--resolution',
      'hold',
      '--by',
      'alice',
      '--episode',
      episodeToken(two.episode!),
    );
    expect(fresh.stderr).toBe('');
    expect(fresh.code).toBe(0);
    expect((await item(id)).resolutions.map((r) => [r.resolution, r.by])).toEqual([['hold', 'alice']]);
    await loop.terminate('test done');
  });
});
