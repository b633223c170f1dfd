import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  DESIRED_NAMESPACE,
  OPERATOR_NAMESPACE,
  removalItemId,
  resolveConflictUpdate,
  type LedgerEntry,
  type RecordDecisionRequest,
  type RemovalPlanAnswer,
  type RemovalRequest,
  type WorkItem,
  workItemId,
} from '../../src/contract';
import { fileBytes } from '../../src/domain';
import { statementText, type DecisionStatement } from '../../src/trust/statement';
import { FAST_POLICY, startConflictingWriter } from '../helpers/fleet';
import { runDatum } from '../helpers/cli';
import { useChildren } from '../helpers/processes';
import { makeKey, sshSign, sshSignText, type SshKey } from '../helpers/ssh-keys';
import { quietLogger, useStack } from '../helpers/stack';
import { forgeDecision, forgePlan, forgeRemoval, type Forged } from './forged-decision-workflows';

/*
 * Issue 31 items 5 and 6, issue 34's last clause, on real parts (dev server, controller worker,
 * the node's agent, the `datum` CLI, a credential holder's own worker): on a node whose agent.yaml
 * requires signatures, a decision that widens what the host may write (a retake, the approval of
 * a removal) is honoured only when an operator key trust.operators lists signed the statement of
 * exactly that decision. Unsigned, signed by a stranger, or signed for another node, item or
 * decision, it is refused by the agent with nothing written, and the loop's ledger records the
 * refusal; signed, it is honoured and the ledger says the author was proven, with the key. On a
 * host that does not require signatures, decisions work as before and are recorded as declared.
 */

const stack = useStack();
const children = useChildren();
const NODE = 'TD-1';
const OPEN = 'TD-2';
const CONFIG = 'etc/app/config.json';

let keys: string;
let release: SshKey;
let operator: SshKey;
let stranger: SshKey;

beforeAll(async () => {
  keys = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-keys-'));
  [release, operator, stranger] = await Promise.all([
    makeKey(keys, 'release@ci'),
    makeKey(keys, 'alice@ops'),
    makeKey(keys, 'stranger'),
  ]);
});
afterAll(async () => await fs.rm(keys, { recursive: true, force: true }));

const datum = (...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir });
const configFile = (node: string) => path.join(stack.fleet.root(node), CONFIG);
const configOn = async (node: string) => JSON.parse(await fs.readFile(configFile(node), 'utf8')) as unknown;
const decisionsOn = async (node: string) =>
  JSON.parse(await fs.readFile(path.join(stack.fleet.root(node), '.datum/decisions.json'), 'utf8')) as {
    targets: Record<string, { kind: string }>;
  };
const notes = (ledger: LedgerEntry[], reason: LedgerEntry['reason']) => ledger.filter((e) => e.reason === reason);

/** agent.yaml of an enforcing node that may remove files, requiring signatures or not. */
async function writeAgent(node: string, require: boolean): Promise<void> {
  const trust = require ? { desired: [release.line], operators: [operator.line], require: true } : {};
  const doc = {
    node,
    root: stack.fleet.root(node),
    reconciliation: { mode: 'enforce' },
    allow: { destructive: ['file'] },
    trust,
  };
  await fs.writeFile(stack.fleet.agentFile(node), stringify(doc));
}

async function writeDesired(node: string, signed: boolean): Promise<void> {
  const resources = { config: { type: 'file', path: CONFIG, content: { workers: 8 } } };
  await fs.writeFile(stack.fleet.desiredFile(node), stringify({ node, generation: 1, resources, policy: FAST_POLICY }));
  if (signed) await sshSign(release, DESIRED_NAMESPACE, stack.fleet.desiredFile(node));
}

/** A node converged on generation 1, then in CONFLICT with a writer that wrote {workers: 2} and stopped. */
async function inConflict(node: string, require: boolean) {
  await writeAgent(node, require);
  await writeDesired(node, require);
  await stack.startAgent(node);
  const loop = await stack.startNode(node, 1);
  await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
  const writer = startConflictingWriter(configFile(node), fileBytes({ workers: 2 }));
  children.push(writer);
  await stack.waitFor(loop, (s) => s.convergence_status === 'CONFLICT');
  writer.kill('SIGKILL');
  return loop;
}

const signed = async (key: SshKey, statement: DecisionStatement) => {
  const text = statementText(statement);
  return { statement: text, signature: await sshSignText(key, OPERATOR_NAMESPACE, text) };
};
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const soon = () => new Date(Date.now() + 5 * 60_000).toISOString();
const retakeOf = (over: Partial<DecisionStatement> = {}): DecisionStatement => ({
  node: NODE,
  decision: 'retake',
  subject: 'config',
  targets: [],
  by: 'mallory',
  expires: soon(),
  ...over,
});

describe('a node that requires signatures, decided through its loop', () => {
  it('refuses an unsigned retake sent as a raw Update, recording it; honours the one signed with datum resolve --sign-key, proven', async () => {
    const loop = await inConflict(NODE, true);
    // A namespace credential holder sends the Update `datum resolve` sends, unsigned.
    const forged = await loop
      .executeUpdate(resolveConflictUpdate, { args: [{ resource_key: 'config', resolution: 'retake', by: 'alice' }] })
      .then(
        () => null,
        (error: Error) => (error.cause as Error | undefined)?.message ?? error.message,
      );
    expect(forged).toMatch(/resolveConflict refused by TD-1: .*UntrustedDecision: .* carries no signature — fix: .*--sign-key/);
    const refused = notes(await stack.ledger(loop), 'SIGNAL_REJECTED');
    expect(refused.at(-1)?.reason_detail).toMatch(/alice's retake of "config" was refused by TD-1: .*no signature/);
    expect((await stack.state(loop)).convergence_status).toBe('CONFLICT');
    expect(await configOn(NODE)).toEqual({ workers: 2 });
    expect(Object.values((await decisionsOn(NODE)).targets).map((d) => d.kind)).toEqual(['conflict']);

    // Through the conflict's work item, unsigned: refused the same, and recorded with the item and a declared author.
    const item = workItemId(NODE, 'CONFLICTING_WRITER', 'config');
    const viaItem = await datum('work', 'resolve', item, '--resolution', 'retake', '--by', 'alice');
    expect(viaItem.code).not.toBe(0);
    expect(viaItem.stderr).toMatch(/resolveWork refused by TD-1: UntrustedDecision: .*no signature/);
    const byItem = notes(await stack.ledger(loop), 'SIGNAL_REJECTED').at(-1);
    expect(byItem).toMatchObject({
      work_resolution: { item_id: item, resolution: 'retake' },
      author: { proof: 'declared', by: 'alice' },
    });
    expect(await configOn(NODE)).toEqual({ workers: 2 });

    // Signed by an operator key the node lists: honoured, and the ledger names the key.
    const cli = await datum(
      'resolve',
      NODE,
      '--resource',
      'config',
      '--resolution',
      'retake',
      '--by',
      'alice',
      '--sign-key',
      operator.file,
    );
    expect([cli.code, cli.stderr]).toEqual([0, '']);
    expect(cli.stdout).toMatch(`signed with operator key ${operator.fingerprint}`);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    expect(await configOn(NODE)).toEqual({ workers: 8 });
    const [recorded] = notes(await stack.ledger(loop), 'OPERATOR_RESOLUTION_RECORDED');
    expect(recorded?.author).toEqual({ proof: 'proven', by: 'alice', key: operator.fingerprint, key_comment: 'alice@ops' });
    // Ended, so what follows meets the agent alone: a live loop would take the forger's yield for its own and keep it.
    await loop.terminate('test done');
  });
});

describe('a namespace credential holder calling that node agent directly', () => {
  let run: <R>(fn: (...args: never[]) => Promise<R>, ...args: unknown[]) => Promise<R>;
  let worker: Worker;
  let running: Promise<void>;

  beforeAll(async () => {
    const taskQueue = `forger-${randomUUID()}`;
    const workflowBundle = await bundleWorkflowCode({
      workflowsPath: path.join(__dirname, 'forged-decision-workflows.ts'),
      logger: quietLogger,
    });
    worker = await Worker.create({ connection: stack.env.nativeConnection, taskQueue, workflowBundle });
    running = worker.run();
    run = async (fn, ...args) =>
      (await stack.client.workflow.execute(fn as never, {
        taskQueue,
        workflowId: `forger/${randomUUID()}`,
        args: args as never,
      })) as never;
  });
  afterAll(async () => {
    worker.shutdown();
    await running;
  });

  const request = (kind: RecordDecisionRequest['kind'], operatorSig?: unknown): RecordDecisionRequest => ({
    node: NODE,
    resource_key: 'config',
    target: `file:${CONFIG}`,
    kind,
    spec_digest: 'sha256:forged',
    value_digest: null,
    generation: 1,
    by: 'mallory',
    at: new Date().toISOString(),
    note: null,
    sequence: [],
    ...(operatorSig ? { operator: operatorSig as RecordDecisionRequest['operator'] } : {}),
  });

  it('a retake is refused unless signed for exactly it by a listed key; a yield needs no signature', async () => {
    // A yield narrows what the host writes: honoured unsigned.
    expect(await run(forgeDecision, request('yield'))).toMatchObject({ outcome: 'carried out' });
    const refusedKeepsYield = async (sig: unknown, pattern: RegExp) => {
      const answer = await run<Forged<unknown>>(forgeDecision, request('retake', sig));
      expect(answer).toMatchObject({ outcome: 'refused', type: 'UntrustedDecision' });
      expect(answer.outcome === 'refused' && answer.message).toMatch(pattern);
      expect((await decisionsOn(NODE)).targets[`file:${CONFIG}`]?.kind).toBe('yield');
    };
    await refusedKeepsYield(
      undefined,
      /honours a retake of "config" only when an operator signed it .* no signature — fix: .*ssh-keygen -Y sign -n datum-operator/,
    );
    await refusedKeepsYield(
      await signed(stranger, retakeOf()),
      new RegExp(`signed by key ${escape(stranger.fingerprint)}, which this host does not trust`),
    );
    await refusedKeepsYield(
      await signed(operator, retakeOf({ node: OPEN })),
      /it is signed for node "TD-2", and this decision's is "TD-1"/,
    );
    await refusedKeepsYield(
      await signed(operator, retakeOf({ subject: 'app' })),
      /it is signed for subject "app", and this decision's is "config"/,
    );
    await refusedKeepsYield(await signed(operator, retakeOf({ decision: 'approve' })), /signed for decision "approve"/);
    await refusedKeepsYield(
      await signed(operator, retakeOf({ by: 'alice' })),
      /signed for by "alice", and this decision's is "mallory"/,
    );
    await refusedKeepsYield(
      await signed(operator, retakeOf({ expires: new Date(Date.now() - 1000).toISOString() })),
      /it expired at/,
    );
    // The genuine signature over another statement's bytes.
    const genuine = await signed(operator, retakeOf());
    await refusedKeepsYield(
      { ...genuine, statement: genuine.statement.replace('mallory', 'malloryy') },
      /does not match these bytes/,
    );
    // Signed for exactly this retake by the operator key: honoured, the author proven.
    const honoured = await run(forgeDecision, request('retake', genuine));
    expect(honoured).toMatchObject({
      outcome: 'carried out',
      answer: { author: { proof: 'proven', by: 'mallory', key: operator.fingerprint, key_comment: 'alice@ops' } },
    });
    expect((await decisionsOn(NODE)).targets).toEqual({});
  });

  it('an approved removal is refused unless the approver signed its exact plan; signed with datum work resolve --sign-key, it removes', async () => {
    const plan = await run<RemovalPlanAnswer>(forgePlan, NODE);
    expect(plan.targets.map((t) => t.target)).toEqual([`file:${CONFIG}`]);
    const item = removalItemId(NODE, { kind: 'decommission', by: 'mallory', note: null, at: '' });
    const targets = plan.targets.map((t) => ({ target: t.target, marker: t.marker, sha256: t.sha256 }));
    const approval = (sig?: unknown): RemovalRequest => ({
      node: NODE,
      item,
      cause: 'decommission',
      key: `${item}@forged-${randomUUID()}`,
      approval: {
        by: 'mallory',
        identity: 'ops@host',
        note: null,
        at: new Date().toISOString(),
        ...(sig ? { operator: sig as never } : {}),
      },
      targets,
    });
    const approveOf = (over: Partial<DecisionStatement> = {}) =>
      retakeOf({
        decision: 'approve',
        subject: item,
        targets: targets.map(({ target, sha256 }) => ({ target, sha256 })),
        ...over,
      });
    const refusedKeepsFile = async (sig: unknown, pattern: RegExp) => {
      const answer = await run<Forged<unknown>>(forgeRemoval, approval(sig));
      expect(answer).toMatchObject({ outcome: 'refused', type: 'UntrustedDecision' });
      expect(answer.outcome === 'refused' && answer.message).toMatch(pattern);
      expect(await configOn(NODE)).toEqual({ workers: 8 });
    };
    await refusedKeepsFile(
      undefined,
      /honours the approval of datum-work\/TD-1\/PLANNED_REMOVAL\/decommission only when an operator signed it .* no signature/,
    );
    await refusedKeepsFile(await signed(stranger, approveOf()), /which this host does not trust/);
    await refusedKeepsFile(await signed(operator, approveOf({ subject: `${item}-other` })), /it is signed for subject/);
    await refusedKeepsFile(await signed(operator, approveOf({ targets: [] })), /names other targets/);
    await fs.access(path.join(stack.fleet.root(NODE), '.datum/removals.jsonl')).then(
      () => expect.fail('nothing may be recorded as removed'),
      () => undefined,
    );

    // The operator decommissions and approves with a signature: removed, and the record says proven.
    await fs.rm(stack.fleet.desiredFile(NODE));
    const planned = await datum('decommission', NODE, '--by', 'alice', '-o', 'json');
    expect([planned.code, planned.stderr]).toEqual([0, '']);
    const id = removalItemId(NODE, { kind: 'decommission', by: 'alice', note: null, at: '' });
    const plannedItem = JSON.parse(planned.stdout) as WorkItem;
    expect([
      plannedItem.id,
      plannedItem.state,
      plannedItem.removal?.kept ?? null,
      plannedItem.removal?.targets.map((t) => t.target),
    ]).toEqual([id, 'OPEN', [], [`file:${CONFIG}`]]);
    const shown = () => datum('work', 'show', id, '-o', 'json').then((r) => JSON.parse(r.stdout) as WorkItem);
    const unsigned = await datum('work', 'resolve', id, '--resolution', 'approve', '--by', 'alice');
    expect(unsigned.code).not.toBe(0);
    expect(unsigned.stderr).toMatch(/UntrustedDecision|only when an operator signed it/);
    expect(await configOn(NODE)).toEqual({ workers: 8 });
    const approved = await datum('work', 'resolve', id, '--resolution', 'approve', '--by', 'alice', '--sign-key', operator.file);
    expect([approved.code, approved.stderr]).toEqual([0, '']);
    await expect(fs.access(configFile(NODE))).rejects.toThrow(/ENOENT/);
    const [line] = (await fs.readFile(path.join(stack.fleet.root(NODE), '.datum/removals.jsonl'), 'utf8')).trim().split('\n');
    expect(JSON.parse(line ?? '')).toMatchObject({
      by: 'alice',
      author: { proof: 'proven', key: operator.fingerprint },
      target: `file:${CONFIG}`,
    });
    const after = await shown();
    expect(after.removal?.done).toMatchObject({ author: { proof: 'proven', key: operator.fingerprint } });
  });
});

describe('a node that does not require signatures', () => {
  it('takes an unsigned retake as before, recorded as declared with the client identity', async () => {
    const loop = await inConflict(OPEN, false);
    const cli = await datum('resolve', OPEN, '--resource', 'config', '--resolution', 'retake', '--by', 'bob');
    expect([cli.code, cli.stderr]).toEqual([0, '']);
    await stack.waitFor(loop, (s) => s.convergence_status === 'CONVERGED');
    const [recorded] = notes(await stack.ledger(loop), 'OPERATOR_RESOLUTION_RECORDED');
    expect(recorded?.author).toEqual({ proof: 'declared', by: 'bob', identity: recorded?.requester?.identity });
    expect(recorded?.author?.proof === 'declared' && recorded.author.identity).toMatch(/@/);
  });
});
