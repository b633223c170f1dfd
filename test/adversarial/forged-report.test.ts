import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileBytes } from '../../src/domain';
import { workItemId, workItemQuery, workReportSignal, type PassReport, type WorkItem } from '../../src/contract';
import { startConflictingWriter } from '../helpers/fleet';
import { useChildren } from '../helpers/processes';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';

/*
 * A namespace credential holder signals a work item a `report` of its own making: one saying a
 * fresh pass found the node CONVERGED (which would close the item "by a fresh observation" that
 * never happened), and one naming another node's loop (which would point the item's resolutions
 * there). The item asks the report's source (the loop, else the ledger store) before it takes
 * it: both are dropped and counted, and the item stays as its own loop left it.
 */

const stack = useStack();
const children = useChildren();

const item = (id: string) => stack.client.workflow.getHandle(id).query(workItemQuery);

describe('a forged report', () => {
  it('neither closes a work item nor moves it to another loop; it is dropped and counted', async () => {
    const node = 'FR-1';
    await stack.fleet.writeDesired(node, 1);
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const loop = await stack.startNode(node, 1);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    const config = path.join(stack.fleet.root(node), 'etc/app/config.json');
    children.push(startConflictingWriter(config, fileBytes({ workers: 2 })));
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONFLICT');
    const id = workItemId(node, 'CONFLICTING_WRITER', 'config');
    const open = await until(() => item(id), { what: `${id} open`, accept: (i) => i.state === 'OPEN', errors: 'retry' });
    const last = open.ledger.at(-1)!;

    const forged: PassReport = {
      node,
      loop: loop.workflowId,
      generation: open.target.generation,
      digest: open.target.digest,
      ledger_seq: last.seq + 1,
      decided_at: new Date().toISOString(),
      fresh: true,
      status: 'CONVERGED',
      reason: 'ALREADY_CONVERGED',
      reason_detail: 'Every managed resource matches desired state in a fresh snapshot.',
      mode: 'enforce',
      retry_budget: open.retry_budget,
      conditions: [],
      resources: [],
    };
    const handle = stack.client.workflow.getHandle(id);
    await handle.signal(workReportSignal, forged);
    // Another node's loop, as if this item's node had moved there: a resolution would follow it.
    await handle.signal(workReportSignal, { ...forged, loop: 'datum/OTHER-1/gen-1', status: 'CONFLICT', conditions: [] });
    // And a copy of a real entry's report with its seq changed: an entry that does not exist.
    await handle.signal(workReportSignal, { ...forged, fresh: false, ledger_seq: last.seq + 1000 });

    const after: WorkItem = await until(() => item(id), {
      what: `${id} to drop three reports`,
      accept: (i) => i.dropped_reports === 3,
      errors: 'retry',
    });
    expect(after.state).toBe('OPEN');
    expect(after.closed).toBeNull();
    expect(after.loop).toBe(loop.workflowId);
    expect(after.ledger.map((l) => l.seq)).toEqual(open.ledger.map((l) => l.seq));
    // The loop's own reports are still taken: its next pass is confirmed and changes nothing forged.
    expect((await stack.state(loop)).convergence_status).toBe('CONFLICT');
    await fs.rm(config, { force: true });
    await loop.terminate('test done');
  });
});
