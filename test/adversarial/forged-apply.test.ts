import { createHash, randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { AgentJournal } from '../../src/agent/node/journal';
import {
  DESIRED_NAMESPACE,
  loopResolveWorkUpdate,
  refreshDesiredSignal,
  type ApplyRequest,
  type LoopResolution,
  type SignedIntent,
} from '../../src/contract';
import {
  desiredDigest,
  desiredValue,
  fileBytes,
  idempotencyKey,
  type AuthorizedAction,
  type DesiredState,
  type Json,
} from '../../src/domain';
import { parseDesiredStateText } from '../../src/schemas/documents';
import { makeKey, sshSign, sshSignText, type SshKey } from '../helpers/ssh-keys';
import { quietLogger, useStack } from '../helpers/stack';
import { forgeApply, type ForgedAnswer } from './forged-apply-workflows';

/*
 * Issue 31, on real parts (dev server, controller worker, the node's agent): a node whose
 * agent.yaml requires signed intent converges on a signed desired state as any node does, and
 * refuses an unsigned generation (BLOCKED, the fix named in the ledger) until it is signed. Then
 * a namespace credential holder runs a workflow of its own that schedules applies on the node's
 * queue (a file write and a service command), with no signature, the genuine signature over other
 * content, a stranger's signature, a document for another node or generation, an expired one:
 * each is refused naming why, and nothing on the node is written, run or fenced.
 */

const stack = useStack();
const NODE = 'TA-1';
const CONFIG = 'etc/app/config.json';

let keys: string;
let release: SshKey;
let stranger: SshKey;

beforeAll(async () => {
  keys = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-keys-'));
  [release, stranger] = await Promise.all([makeKey(keys, 'release@ci'), makeKey(keys, 'stranger')]);
});
afterAll(async () => await fs.rm(keys, { recursive: true, force: true }));

const desiredFile = () => stack.fleet.desiredFile(NODE);
const configOnNode = async () => JSON.parse(await fs.readFile(path.join(stack.fleet.root(NODE), CONFIG), 'utf8')) as Json;
const parsed = (text: string): DesiredState =>
  parseDesiredStateText(text, 'desired', { revision: 'r', author: null, loaded_at: '' });

describe('a node that requires signed intent, driven by its loop', () => {
  it('converges on a signed generation, blocks an unsigned one naming the fix, and takes it once signed and refreshed', async () => {
    await stack.fleet.writeDesired(NODE, 1);
    await sshSign(release, DESIRED_NAMESPACE, desiredFile());
    await stack.fleet.writeAgent(NODE, { mode: 'enforce', trust: { desired: [release.line], require: true } });
    await stack.startAgent(NODE);
    const first = await stack.startNode(NODE, 1);
    await stack.waitFor(first, (s) => s.convergence_status === 'CONVERGED');
    expect(await configOnNode()).toEqual({ workers: 8 });
    await first.terminate('next generation');

    // Generation 2, written and not signed.
    await stack.fleet.writeDesired(NODE, 2, { workers: 16 });
    await fs.rm(`${desiredFile()}.sig`);
    const second = await stack.startNode(NODE, 2);
    const blocked = await stack.waitFor(second, (s) => s.convergence_status === 'BLOCKED' && s.reason === 'ACTION_REFUSED');
    const fix =
      /the apply carries no signature — fix: the desired-state author signs desired\/nodes\/TA-1.yaml .*\(datum sign desired\/nodes\/TA-1.yaml --key <private key>, or ssh-keygen -Y sign -n datum-desired/;
    expect(blocked.reason_detail).toMatch(fix);
    const condition = blocked.conditions.find((c) => c.type === 'ACTION_REFUSED' && c.resource_key === 'config');
    expect(condition?.message).toMatch(fix);
    const ledger = await stack.ledger(second);
    const refused = ledger.flatMap((e) => e.execution_evidence).filter((r) => r.outcome === 'refused');
    expect(refused.map((r) => r.refusal_type)).toContain('UntrustedIntent');
    expect(await configOnNode()).toEqual({ workers: 8 });

    // A raw resolveWork Update to this loop naming another node's item is refused, and nothing is recorded.
    const foreign: LoopResolution = {
      item_id: 'datum-work/TA-9/ACTION_REFUSED/config',
      condition: 'ACTION_REFUSED',
      resource_key: 'config',
      resolution: 'hold',
      attempts: null,
      by: 'mallory',
      identity: 'ops@host',
      note: null,
    };
    const rejected = await second.executeUpdate(loopResolveWorkUpdate, { args: [foreign] }).then(
      () => null,
      (error: Error) => error.cause as Error,
    );
    expect(rejected?.message).toMatch(
      /item_id "datum-work\/TA-9\/ACTION_REFUSED\/config" is not the item of TA-1's ACTION_REFUSED on "config", which is datum-work\/TA-1\/ACTION_REFUSED\/config — fix:/,
    );
    expect((await stack.ledger(second)).filter((e) => e.reason === 'OPERATOR_RESOLUTION_RECORDED')).toEqual([]);

    // Signed now: `datum refresh` re-binds the same generation with its signature, and the refusal,
    // which stood for the old signature only, is tried again at once.
    await sshSign(release, DESIRED_NAMESPACE, desiredFile());
    const signed = parsed(await fs.readFile(desiredFile(), 'utf8'));
    await second.signal(refreshDesiredSignal, { generation: 2, digest: desiredDigest(signed.resources, signed.policy) });
    await stack.waitFor(second, (s) => s.convergence_status === 'CONVERGED');
    expect(await configOnNode()).toEqual({ workers: 16 });
    await second.terminate('test done');
  });
});

describe('a namespace credential holder scheduling applies on that node', () => {
  let forge: (request: ApplyRequest) => Promise<ForgedAnswer>;
  let worker: Worker;
  let running: Promise<void>;

  beforeAll(async () => {
    const taskQueue = `forger-${randomUUID()}`;
    const workflowBundle = await bundleWorkflowCode({
      workflowsPath: path.join(__dirname, 'forged-apply-workflows.ts'),
      logger: quietLogger,
    });
    worker = await Worker.create({ connection: stack.env.nativeConnection, taskQueue, workflowBundle });
    running = worker.run();
    // It observes the node's genuine resources first, as anyone with the credential can.
    forge = async (request) => {
      const { resources } = parsed(await fs.readFile(desiredFile(), 'utf8'));
      return await stack.client.workflow.execute(forgeApply, {
        taskQueue,
        workflowId: `forger/${randomUUID()}`,
        args: [request, resources],
      });
    };
  });
  afterAll(async () => {
    worker.shutdown();
    await running;
  });

  /** An action as the loop would send it for `doc` (its digest, key, TTL), with `kind` and `spec` of the forger's choosing. */
  function actionFor(doc: DesiredState, key: string, kind: string, spec: Json, generation = doc.generation): AuthorizedAction {
    const digest = desiredDigest(doc.resources, doc.policy);
    return {
      resource_key: key,
      action: kind,
      desired_generation: generation,
      desired_digest: digest,
      idempotency_key: idempotencyKey(NODE, key, generation, digest),
      observed_marker: null,
      action_seq: 1_000_000,
      spec,
      observed_at: new Date().toISOString(),
      observation_ttl: doc.policy.observation_ttl,
    };
  }

  const configWrite = (doc: DesiredState, content: Json, generation?: number) => {
    const bytes = fileBytes(content);
    return actionFor(doc, 'config', 'file.write', { path: CONFIG, content: bytes, sha256: sha256(bytes) }, generation);
  };

  /** Refused as `type` with `pattern` in its message, and the node as it was: files, fence, no command run. */
  async function refusedUntouched(request: ApplyRequest, type: string, pattern: RegExp | string) {
    const journal = new AgentJournal(stack.fleet.root(NODE));
    const fence = await journal.acceptedGeneration();
    const config = await configOnNode();
    const answer = await forge(request);
    expect(answer).toMatchObject({ outcome: 'refused', type });
    expect(answer.outcome === 'refused' && answer.message).toMatch(pattern);
    expect(await configOnNode()).toEqual(config);
    expect(await journal.acceptedGeneration()).toEqual(fence);
    await expect(fs.stat(pwned())).rejects.toThrow(/ENOENT/);
  }

  const pwned = () => path.join(stack.fleet.root(NODE), 'pwned');

  it('is refused for every apply that is not the signed intent, and nothing on the node is written or run', async () => {
    // Signed as the test above leaves it: generation 2, converged, its service running.
    await sshSign(release, DESIRED_NAMESPACE, desiredFile());
    const text = await fs.readFile(desiredFile(), 'utf8');
    const genuine: SignedIntent = { document: text, signature: await fs.readFile(`${desiredFile()}.sig`, 'utf8') };
    const doc = parsed(text);
    const res = doc.resources;
    const app = desiredValue('app', res) as { build: string; config_sha256: string };
    const command = ['sh', '-c', `touch ${pwned()}`];
    const serviceRun = actionFor(doc, 'app', 'service.restart', { ...app, command, config_path: CONFIG });
    const at = (request: Omit<ApplyRequest, 'node'>): ApplyRequest => ({ node: NODE, ...request });

    // No signature at all: a file write and a service command.
    await refusedUntouched(at({ action: configWrite(doc, { workers: 99 }) }), 'UntrustedIntent', /carries no signature/);
    await refusedUntouched(at({ action: serviceRun }), 'UntrustedIntent', /carries no signature/);
    // The genuine signature carried along: what it signed plans neither this content nor this command.
    await refusedUntouched(
      at({ action: configWrite(doc, { workers: 99 }), signed: genuine }),
      'UntrustedIntent',
      /not one the signed desired state .* plans: its file.write spec is not what the document's plan for "config" writes/,
    );
    await refusedUntouched(
      at({ action: serviceRun, signed: genuine }),
      'UntrustedIntent',
      /not what the document's plan for "app" writes/,
    );
    // The document changed after signing, its signature kept.
    const changed = text.replace('workers: 16', 'workers: 99');
    await refusedUntouched(
      at({ action: configWrite(parsed(changed), { workers: 99 }), signed: { document: changed, signature: genuine.signature } }),
      'UntrustedIntent',
      /does not match these bytes/,
    );
    // Signed, by a key this host does not list.
    await refusedUntouched(
      at({ action: configWrite(parsed(changed), { workers: 99 }), signed: await signedBy(stranger, changed) }),
      'UntrustedIntent',
      `signed by key ${stranger.fingerprint}, which this host does not trust`,
    );
    // Signed by the trusted key, for another node; and the genuine document sent with another generation.
    const other = text.replace(`node: ${NODE}`, 'node: TA-2');
    await refusedUntouched(
      at({ action: configWrite(parsed(other), { workers: 16 }), signed: await signedBy(release, other) }),
      'UntrustedIntent',
      /the document is for node "TA-2", not this node "TA-1"/,
    );
    await refusedUntouched(
      at({ action: configWrite(doc, { workers: 16 }, 3), signed: genuine }),
      'UntrustedIntent',
      /the document is generation 2, and the action claims generation 3/,
    );
    // Signed by the trusted key, and expired: the author vouches for it no longer.
    const expired = stringify({ ...(parse(changed) as object), expires: new Date(Date.now() - 60_000).toISOString() });
    await refusedUntouched(
      at({ action: configWrite(parsed(expired), { workers: 99 }), signed: await signedBy(release, expired) }),
      'ExpiredIntent',
      /expired at .*; past its expiry this host does not act on it/,
    );
  });
});

const signedBy = async (key: SshKey, document: string): Promise<SignedIntent> => ({
  document,
  signature: await sshSignText(key, DESIRED_NAMESPACE, document),
});

const sha256 = (bytes: string) => createHash('sha256').update(bytes).digest('hex');
