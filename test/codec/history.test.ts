import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AesGcmCodec, ENCRYPTED_ENCODING, KEY_ID_METADATA, loadKeyring } from '../../src/codec';
import { reconcileWorkflowId, stateQuery } from '../../src/contract';
import {
  CodecStack,
  historyBytes,
  isCoreMarkerData,
  metadataText,
  newKey,
  payloadsOf,
  waitForState,
  writeKeyring,
  type CodecEnv,
} from './harness';

/*
 * Encrypted payloads on the real loop: a dev server, the controller worker and an agent, all with
 * the codec on. Temporal's history (what its database, or Temporal Cloud, stores) holds only
 * ciphertext, the desired state and a sensitive file's content included; keys rotate without a
 * running workflow noticing; and a process missing a key, or holding a wrong one, refuses with
 * the key id named and acts on nothing.
 */

const NODE = 'C-1';
const SECRET = `db-password=hunter2-${Date.now()}`;
const SECRET_PATH = 'etc/app/secret.env';

let stack: CodecStack;
let k1: string;
let ringV1: CodecEnv;
let ringV2: CodecEnv;
let client: Client;
let handle: WorkflowHandle;

const secretOnNode = () => fs.readFile(path.join(stack.fleet.root(NODE), SECRET_PATH), 'utf8');

beforeAll(async () => {
  stack = await CodecStack.start();
  k1 = newKey();
  ringV1 = await writeKeyring(stack.keysDir, 'v1', { k1 });
  ringV2 = await writeKeyring(stack.keysDir, 'v2', { k1, k2: newKey() }, 'k2');
  await stack.fleet.writeDesired(NODE, 1, {
    extra: { secret: { type: 'file', path: SECRET_PATH, content: SECRET, sensitive: true } },
  });
  await stack.fleet.writeAgent(NODE, { mode: 'enforce' });
  await stack.startController(ringV1);
  await stack.startAgent(NODE, ringV1);
  client = await stack.client(ringV1);
  handle = await stack.startNode(client, NODE, 1);
  await waitForState(handle, (s) => s.convergence_status === 'CONVERGED');
}, 180_000);

afterAll(async () => {
  await stack?.stop();
});

describe.sequential('payload codec on a running loop', () => {
  it('history holds only ciphertext: every payload binary/encrypted, no desired content anywhere', async () => {
    // The agent decoded the apply and wrote the real content.
    expect(await secretOnNode()).toBe(SECRET);

    const history = await handle.fetchHistory();
    const payloads = payloadsOf(history);
    const kinds = new Set(payloads.map((p) => p.at.split('.')[1]));
    // The workflow's input, the authority read (a local activity's marker), observe and apply.
    expect([...kinds]).toEqual(
      expect.arrayContaining([
        'workflowExecutionStartedEventAttributes',
        'markerRecordedEventAttributes',
        'activityTaskScheduledEventAttributes',
        'activityTaskCompletedEventAttributes',
      ]),
    );
    const clear = payloads.filter(
      (p) => metadataText(p.payload, 'encoding') !== ENCRYPTED_ENCODING && !isCoreMarkerData(p.at, p.payload),
    );
    expect(clear.map((p) => `${p.at} (${metadataText(p.payload, 'encoding')})`)).toEqual([]);
    const encrypted = payloads.filter((p) => metadataText(p.payload, 'encoding') === ENCRYPTED_ENCODING);
    expect(new Set(encrypted.map((p) => metadataText(p.payload, KEY_ID_METADATA)))).toEqual(new Set(['k1']));

    // Not in any payload, nor anywhere else in the stored history (failures, markers' details).
    const stored = historyBytes(history);
    for (const plain of [SECRET, 'hunter2', SECRET_PATH, '"workers":8', '"generation":1'])
      expect(stored.includes(Buffer.from(plain)), `history contains ${plain}`).toBe(false);
    // The ledger store keeps the digest and size of a sensitive file, never its content.
    const ledgerFile = await fs.readFile(path.join(stack.fleet.dir, 'ledger.sqlite'));
    expect(ledgerFile.includes(Buffer.from('hunter2'))).toBe(false);
  });

  it('a key rotation: old payloads still decode on restarted parts, new ones use the new key', async () => {
    const before = Date.now();
    await stack.startController(ringV2);
    await stack.startAgent(NODE, ringV2);
    client = await stack.client(ringV2);
    handle = client.workflow.getHandle(reconcileWorkflowId(NODE, 1));
    // The new controller has no cache: it replays the whole run, k1 payloads and all, then goes on.
    const state = await waitForState(handle, (s) => s.last_verified_at !== null && Date.parse(s.last_verified_at) > before);
    expect(state.convergence_status).toBe('CONVERGED');
    const all = payloadsOf(await handle.fetchHistory());
    const encrypted = all.filter((p) => metadataText(p.payload, 'encoding') === ENCRYPTED_ENCODING);
    expect(all.filter((p) => !encrypted.includes(p) && !isCoreMarkerData(p.at, p.payload)).map((p) => p.at)).toEqual([]);
    const ids = encrypted.map((p) => metadataText(p.payload, KEY_ID_METADATA));
    expect(new Set(ids)).toEqual(new Set(['k1', 'k2']));
    expect(ids.at(-1)).toBe('k2');
  });

  it('a controller whose keyring lost k1 refuses the history, naming k1, and resumes when k1 is back', async () => {
    const ringK2Only = await writeKeyring(stack.keysDir, 'k2-only', {
      k2: (JSON.parse(await fs.readFile(ringV2.DATUM_CODEC_KEYS, 'utf8')) as Record<string, string>).k2,
    });
    await stack.startController(ringK2Only);
    // Its first workflow task replays from the start event, encrypted under k1: refused.
    await expect
      .poll(async () => failuresOf(await handle.fetchHistory()).join('\n'), { timeout: 60_000, interval: 500 })
      .toMatch(/encrypted with key "k1", which the codec keyring .*k2-only\.json does not hold/);
    // A client without k1 cannot read the run's start either.
    const k2Client = await stack.client(ringK2Only);
    await expect(
      k2Client.workflow
        .getHandle(handle.workflowId)
        .describe()
        .then((d) => d.memo),
    ).rejects.toThrow(/key "k1"/);
    const before = Date.now();
    await stack.startController(ringV2);
    const state = await waitForState(
      handle,
      (s) => s.last_verified_at !== null && Date.parse(s.last_verified_at) > before,
      90_000,
    );
    expect(state.convergence_status).toBe('CONVERGED');
  });

  it('an agent with a wrong key of the same id refuses the task, naming the key, and writes nothing', async () => {
    const wrong = await writeKeyring(stack.keysDir, 'wrong', { k1, k2: newKey() }, 'k2');
    await stack.startAgent(NODE, wrong);
    await expect
      .poll(
        async () => ((await handle.describe()).raw.pendingActivities ?? []).map((a) => a.lastFailure?.message ?? '').join('\n'),
        { timeout: 60_000, interval: 500 },
      )
      .toMatch(/refused a payload encrypted with key "k2": it does not authenticate under the key "k2" in .*wrong\.json/);
    // Nothing was decoded wrongly: once every attempt of that observe was refused, the loop has
    // its failure and no observation, so no pass was verified meanwhile.
    const stuck = await handle.query(stateQuery);
    await expect
      .poll(async () => activityFailuresOf(await handle.fetchHistory()).join('\n'), { timeout: 60_000, interval: 500 })
      .toMatch(/does not authenticate under the key "k2"/);
    expect((await handle.query(stateQuery)).last_verified_at).toBe(stuck.last_verified_at);

    await stack.startAgent(NODE, ringV2);
    const before = Date.now();
    const state = await waitForState(
      handle,
      (s) => s.last_verified_at !== null && Date.parse(s.last_verified_at) > before,
      90_000,
    );
    expect(state.convergence_status).toBe('CONVERGED');
    expect(await secretOnNode()).toBe(SECRET);
  });

  it('the codec server protocol decodes the run for a keyring holder (the same codec, by payload)', async () => {
    const codec = new AesGcmCodec(loadKeyring(ringV2.DATUM_CODEC_KEYS, 'k2'));
    const payloads = payloadsOf(await handle.fetchHistory()).map((p) => p.payload);
    const decoded = await codec.decode(payloads.map((p) => ({ metadata: p.metadata ?? {}, data: p.data ?? new Uint8Array() })));
    expect(decoded.some((p) => Buffer.from(p.data ?? []).includes(Buffer.from(SECRET)))).toBe(true);
  });
});

function failuresOf(history: Awaited<ReturnType<WorkflowHandle['fetchHistory']>>): string[] {
  return (history.events ?? []).flatMap((e) => {
    const message = e.workflowTaskFailedEventAttributes?.failure?.message;
    return message ? [message] : [];
  });
}

/** The failures of activities that ended failed (every attempt spent), with their causes. */
function activityFailuresOf(history: Awaited<ReturnType<WorkflowHandle['fetchHistory']>>): string[] {
  return (history.events ?? []).flatMap((e) => {
    const messages: string[] = [];
    for (let f = e.activityTaskFailedEventAttributes?.failure; f; f = f.cause) if (f.message) messages.push(f.message);
    return messages;
  });
}
