import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR_NAMESPACE, type OperatorSignature } from '../../src/contract';
import { decisionRequest } from '../../src/domain';
import { statementText, type DecisionStatement } from '../../src/trust/statement';
import { makeKey, sshSignText, type SshKey } from '../helpers/ssh-keys';
import { n24 } from '../unit/fixtures';
import { cleanupNodes, expectRefusal, makeNode, type TestNode } from './helpers';

/*
 * The agent's check of an operator's signed retake, in process (the real-process case is
 * test/adversarial/forged-decision.test.ts): keys rotate by agent.yaml alone, counted from the next
 * decision; a host that lists operator keys without requiring them takes an unsigned retake as
 * declared and still verifies a signature it is sent; a statement may not stand for long.
 */

let keys: string;
let oncall: SshKey;
let next: SshKey;
let stranger: SshKey;

beforeAll(async () => {
  keys = await fs.mkdtemp(path.join(process.env.TMPDIR ?? '/tmp', 'datum-keys-'));
  [oncall, next, stranger] = await Promise.all([
    makeKey(keys, 'oncall'),
    makeKey(keys, 'oncall-next'),
    makeKey(keys, 'stranger'),
  ]);
});
afterAll(async () => await fs.rm(keys, { recursive: true, force: true }));
afterEach(cleanupNodes);

async function trusting(t: TestNode, operators: SshKey[], require: boolean): Promise<void> {
  const doc = {
    node: t.node,
    root: t.root,
    reconciliation: { mode: 'enforce' },
    trust: { operators: operators.map((k) => k.line), require },
  };
  if (require) Object.assign(doc.trust, { desired: [stranger.line] });
  await fs.writeFile(t.configPath, JSON.stringify(doc));
}

const intent = n24(12);
const decide = (kind: 'yield' | 'retake', operator?: OperatorSignature) => ({
  ...decisionRequest(intent, 'config', { kind, by: 'oncall', at: new Date().toISOString(), note: null })!,
  ...(operator ? { operator } : {}),
});
const retake = (over: Partial<DecisionStatement> = {}): DecisionStatement => ({
  node: 'N-24',
  decision: 'retake',
  subject: 'config',
  targets: [],
  by: 'oncall',
  expires: new Date(Date.now() + 5 * 60_000).toISOString(),
  ...over,
});
const signedBy = async (key: SshKey, statement = retake()): Promise<OperatorSignature> => {
  const text = statementText(statement);
  return { statement: text, signature: await sshSignText(key, OPERATOR_NAMESPACE, text) };
};

describe("an operator's signed retake, on the agent", () => {
  it('rotates with agent.yaml: a key removed is refused from the next decision, the one added is taken', async () => {
    const t = await makeNode();
    await trusting(t, [oncall, next], true);
    await t.acts.recordDecision(decide('yield'));
    expect((await t.acts.recordDecision(decide('retake', await signedBy(oncall)))).author).toMatchObject({
      proof: 'proven',
      key: oncall.fingerprint,
    });
    await t.acts.recordDecision(decide('yield'));
    await trusting(t, [next], true);
    const failure = await expectRefusal(t.acts.recordDecision(decide('retake', await signedBy(oncall))), 'UntrustedDecision');
    expect(failure.message).toContain(
      `signed by key ${oncall.fingerprint}, which this host does not trust (trust.operators lists ${next.fingerprint})`,
    );
    const taken = await t.acts.recordDecision(decide('retake', await signedBy(next)));
    expect([taken.holds, taken.author]).toEqual([
      null,
      { proof: 'proven', by: 'oncall', key: next.fingerprint, key_comment: 'oncall-next' },
    ]);
  });

  it('where signatures are not required, an unsigned retake is declared, and a signature sent is still verified', async () => {
    const t = await makeNode();
    await trusting(t, [oncall], false);
    await t.acts.recordDecision(decide('yield'));
    expect((await t.acts.recordDecision(decide('retake'))).author).toEqual({ proof: 'declared', by: 'oncall', identity: null });
    await t.acts.recordDecision(decide('yield'));
    await expectRefusal(t.acts.recordDecision(decide('retake', await signedBy(stranger))), 'UntrustedDecision');
    expect((await t.acts.recordDecision(decide('retake', await signedBy(oncall)))).author).toMatchObject({ proof: 'proven' });
  });

  it('refuses a statement that would stand for more than an hour', async () => {
    const t = await makeNode();
    await trusting(t, [oncall], true);
    await t.acts.recordDecision(decide('yield'));
    const later = retake({ expires: new Date(Date.now() + 2 * 3600_000).toISOString() });
    const failure = await expectRefusal(
      t.acts.recordDecision(decide('retake', await signedBy(oncall, later))),
      'UntrustedDecision',
    );
    expect(failure.message).toMatch(
      /more than 60 minutes ahead, and a signed decision stands for a short while only — fix: .*--sign-key/,
    );
  });
});
