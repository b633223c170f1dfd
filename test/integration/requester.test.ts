import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { DesiredStateAuthority } from '../../src/activities/authority';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { refreshDesiredUpdate, resolveConflictSignal } from '../../src/contract';
import { FAST_POLICY, startConflictingWriter } from '../helpers/fleet';
import { useStack } from '../helpers/stack';
import { useChildren } from '../helpers/processes';

/*
 * Who resolved (issue 18): the ledger records, on each note an operator's signal or Update wrote,
 * the name the request declared (`by`) next to the identity Temporal recorded for it: the
 * `identity` of the client connection that sent it. Real dev server, controller, agent; each
 * request is sent by its own client, with an identity of its own that no payload repeats.
 */

const stack = useStack();
const children = useChildren();
const clients: Client[] = [];

const CONFIG = 'etc/app/config.json';

/** A client on the stack's server that introduces itself as `identity`, as `datum` or `temporal` would with TEMPORAL_IDENTITY. */
function clientAs(identity: string): Client {
  const client = new Client({ connection: stack.client.connection, namespace: stack.client.options.namespace, identity });
  clients.push(client);
  return client;
}

const notes = (ledger: LedgerEntry[], reason: LedgerEntry['reason']) => ledger.filter((e) => e.reason === reason);

describe('who resolved: the identity Temporal recorded, next to the declared name', () => {
  it('records it for each resolveConflict signal and for an Update, in the loop ledger and the store', async () => {
    const node = 'RQ-1';
    const file = path.join(stack.fleet.root(node), CONFIG);
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
    const resources = {
      config: { type: 'file', path: CONFIG, content: { workers: 8 } },
      maintenance: { type: 'flag', value: false },
    };
    await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation: 1, resources, policy: FAST_POLICY }));
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const writer = startConflictingWriter(file, fileBytes({ workers: 2 }));
    children.push(writer);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONFLICT');
    writer.kill('SIGKILL');

    // Two signals of one name from two clients, both declaring alice: one the loop rejects, one it records.
    const mallory = clientAs('mallory-laptop@10.0.0.66').workflow.getHandle(handle.workflowId);
    await mallory.signal(resolveConflictSignal, { resource_key: 'nope', resolution: 'retake', by: 'alice' });
    await stack.waitFor(handle, (_s, ledger) => notes(ledger, 'SIGNAL_REJECTED').length === 1);
    const alice = clientAs('alice-workstation@ops-7').workflow.getHandle(handle.workflowId);
    await alice.signal(resolveConflictSignal, { resource_key: 'config', resolution: 'retake', by: 'alice', note: 'cron gone' });
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');

    const ledger = await stack.ledger(handle);
    // The declared name is whatever the sender wrote; the identity is the connection's.
    expect(notes(ledger, 'SIGNAL_REJECTED')[0]?.requester).toEqual({
      request: 'resolveConflict',
      via: 'signal',
      by: 'alice',
      identity: 'mallory-laptop@10.0.0.66',
    });
    const resolved = notes(ledger, 'OPERATOR_RESOLUTION_RECORDED')[0];
    expect(resolved?.requester).toEqual({
      request: 'resolveConflict',
      via: 'signal',
      by: 'alice',
      identity: 'alice-workstation@ops-7',
    });

    // An Update (what `datum resolve` and `datum refresh` send) is named by its id.
    const read = await new DesiredStateAuthority(stack.fleet.dir).read(node);
    if (!read.ok) throw new Error(read.error);
    const bob = clientAs('bob-ci@runner-3').workflow.getHandle(handle.workflowId);
    await bob.executeUpdate(refreshDesiredUpdate, { args: [{ generation: 1, digest: read.intent.digest }] });
    const after = await stack.ledger(handle);
    const refreshed = after.filter((e) => e.requester?.request === 'refreshDesired');
    expect(refreshed.map((e) => e.requester)).toEqual([
      { request: 'refreshDesired', via: 'update', by: null, identity: 'bob-ci@runner-3' },
    ]);

    // The fleet-wide store keeps it too.
    await stack.waitFor(handle, () => true);
    const stored = await stack.ledgerStore.list(node);
    expect(stored.find((e) => e.seq === resolved?.seq)?.requester?.identity).toBe('alice-workstation@ops-7');
    await handle.terminate('test done');
  }, 120_000);
});
