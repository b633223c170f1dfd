import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { DESIRED_NAMESPACE, type ApplyRequest, type SignedIntent } from '../../src/contract';
import { emptyHistory, planItems, type AuthorizedAction } from '../../src/domain';
import { toAuthorized } from '../../src/domain/authorize';
import { classified } from '../../src/domain/verdict';
import { AgentJournal } from '../../src/agent/node/journal';
import { parseDesiredStateText } from '../../src/schemas/documents';
import { cleanupNodes, expectRefusal, makeNode, runActivity, snapshot, type TestNode } from './helpers';
import { makeKey, sshSign, type SshKey } from '../helpers/ssh-keys';

/*
 * A host whose agent.yaml requires signed intent, in process: each apply is verified end to end
 * (a key it lists, the exact signed bytes, this node, this generation, not expired, the action one
 * the document plans), and whatever fails is refused with nothing on the node read or written and
 * its fence unmoved. Signatures are made by ssh-keygen, as an author's would be.
 */

let keys: string;
let release: SshKey;
let spare: SshKey;
let stranger: SshKey;

beforeAll(async () => {
  keys = await fs.mkdtemp(path.join(process.env.TMPDIR ?? '/tmp', 'datum-keys-'));
  [release, spare, stranger] = await Promise.all([
    makeKey(keys, 'release@ci'),
    makeKey(keys, 'release-next@ci'),
    makeKey(keys, 'stranger'),
  ]);
});
afterAll(async () => await fs.rm(keys, { recursive: true, force: true }));
afterEach(cleanupNodes);

async function trustingNode(trust: { desired?: SshKey[]; require?: boolean } = {}): Promise<TestNode> {
  const t = await makeNode();
  await writeTrust(t, trust);
  return t;
}

async function writeTrust(t: TestNode, trust: { desired?: SshKey[]; require?: boolean }): Promise<void> {
  const doc = {
    node: t.node,
    root: t.root,
    reconciliation: { mode: 'enforce' },
    trust: { desired: (trust.desired ?? [release]).map((k) => k.line), require: trust.require ?? true },
  };
  await fs.writeFile(t.configPath, stringify(doc));
}

interface Doc {
  generation?: number;
  node?: string;
  expires?: string;
  command?: string[];
}

/** N-24's desired state with a config file and a flag, written under the node's base dir. */
function desiredText(t: TestNode, d: Doc = {}): string {
  return stringify({
    node: d.node ?? t.node,
    generation: d.generation ?? 12,
    ...(d.expires ? { expires: d.expires } : {}),
    resources: {
      config: { type: 'file', path: 'etc/app/config.json', content: { workers: 8 } },
      maintenance: { type: 'flag', value: true },
    },
  });
}

/** The file signed by `key` with ssh-keygen, as the authority would carry it. */
async function signed(t: TestNode, text: string, key: SshKey = release): Promise<SignedIntent> {
  const file = path.join(t.base, 'N-24.yaml');
  await fs.writeFile(file, text);
  return { document: text, signature: await sshSign(key, DESIRED_NAMESPACE, file) };
}

/** What the controller plans from `text` against what the agent observes now (the real planner). */
async function planned(t: TestNode, text: string): Promise<AuthorizedAction[]> {
  const intent = parseDesiredStateText(text, 'desired/nodes/N-24.yaml', { revision: 'r', author: null, loaded_at: '' });
  const observation = await t.observe(intent.resources);
  const pre = classified(intent, observation, emptyHistory());
  return planItems(intent, pre.assessments, 1, observation.observed_at).map((x) => toAuthorized(x.action));
}

const apply = (t: TestNode, action: AuthorizedAction, envelope?: SignedIntent) =>
  runActivity((r: ApplyRequest) => t.acts.apply(r), { node: t.node, action, ...(envelope ? { signed: envelope } : {}) });

/** Applies `action` with `envelope` and expects `type`, with nothing on the node changed and the fence where it was. */
async function refusedUntouched(t: TestNode, action: AuthorizedAction, envelope: SignedIntent | undefined, type: string) {
  const before = await snapshot(t.root);
  const fence = await new AgentJournal(t.root).acceptedGeneration();
  const failure = await expectRefusal(apply(t, action, envelope), type);
  expect(await snapshot(t.root)).toEqual(before);
  expect(await new AgentJournal(t.root).acceptedGeneration()).toEqual(fence);
  return failure;
}

describe('a host that requires signed intent', () => {
  it('carries out what a key it lists signed, exactly as planned from the signed bytes', async () => {
    const t = await trustingNode();
    const text = desiredText(t);
    const envelope = await signed(t, text);
    for (const action of await planned(t, text)) expect((await apply(t, action, envelope)).outcome).toBe('applied');
    expect(JSON.parse(await fs.readFile(path.join(t.root, 'etc/app/config.json'), 'utf8'))).toEqual({ workers: 8 });
  });

  it('refuses an unsigned apply, naming how to sign, and neither reads nor writes the node nor moves its fence', async () => {
    const t = await trustingNode();
    const [write] = await planned(t, desiredText(t));
    const failure = await refusedUntouched(t, { ...write, desired_generation: 99_999_999 }, undefined, 'UntrustedIntent');
    expect(failure.message).toMatch(
      /acts only on signed desired state \(trust.require in its agent.yaml\), and the apply carries no signature — fix: .*datum sign desired\/nodes\/N-24.yaml .*ssh-keygen -Y sign -n datum-desired/,
    );
    expect(failure.details?.[0]).toMatchObject({ check: 'unsigned' });
  });

  it('refuses a document changed after signing', async () => {
    const t = await trustingNode();
    const text = desiredText(t);
    const envelope = await signed(t, text);
    const changed = text.replace('workers: 8', 'workers: 9');
    const [write] = await planned(t, changed);
    const failure = await refusedUntouched(t, write, { ...envelope, document: changed }, 'UntrustedIntent');
    expect(failure.message).toMatch(/does not match these bytes: they changed after signing/);
  });

  it("refuses a signature by a key agent.yaml does not list, naming that key's fingerprint", async () => {
    const t = await trustingNode();
    const text = desiredText(t);
    const [write] = await planned(t, text);
    const failure = await refusedUntouched(t, write, await signed(t, text, stranger), 'UntrustedIntent');
    expect(failure.message).toContain(`signed by key ${stranger.fingerprint}, which this host does not trust`);
  });

  it("refuses another node's signed document, and a signed document of another generation", async () => {
    const t = await trustingNode();
    const other = desiredText(t, { node: 'N-25' });
    const [forOther] = await planned(t, other);
    expect((await refusedUntouched(t, forOther, await signed(t, other), 'UntrustedIntent')).message).toContain(
      'the document is for node "N-25", not this node "N-24"',
    );
    const g11 = desiredText(t, { generation: 11 });
    const [write12] = await planned(t, desiredText(t));
    expect((await refusedUntouched(t, write12, await signed(t, g11), 'UntrustedIntent')).message).toContain(
      'the document is generation 11, and the action claims generation 12',
    );
  });

  it('refuses a signed document past its expires (a freeze), and names how to renew it', async () => {
    const t = await trustingNode();
    const text = desiredText(t, { expires: '2020-01-01T00:00:00Z' });
    const [write] = await planned(t, text);
    const failure = await refusedUntouched(t, write, await signed(t, text), 'ExpiredIntent');
    expect(failure.message).toMatch(/expired at 2020-01-01T00:00:00.000Z .* — fix: .*signs it again with a later expires/);
  });

  it('refuses an action the signed document does not plan: other bytes, another path, a flag value', async () => {
    const t = await trustingNode();
    const text = desiredText(t);
    const envelope = await signed(t, text);
    const [write, flag] = await planned(t, text);
    const spec = write.spec as Record<string, string>;
    const forgeries: AuthorizedAction[] = [
      { ...write, spec: { ...spec, content: 'pwned' } },
      { ...write, spec: { ...spec, path: 'etc/other.json' } },
      { ...flag, spec: { name: 'maintenance', value: false } },
    ];
    for (const forged of forgeries) {
      const failure = await refusedUntouched(t, forged, envelope, 'UntrustedIntent');
      expect(failure.message).toMatch(
        /the action is not one the signed desired state .* plans: its (file|flag).write spec is not what/,
      );
    }
  });

  it('rotation: two keys at once; a key removed from agent.yaml is refused from the next apply on', async () => {
    const t = await trustingNode({ desired: [release, spare] });
    const text = desiredText(t);
    const bySpare = await signed(t, text, spare);
    const [write, flag] = await planned(t, text);
    expect((await apply(t, write, bySpare)).outcome).toBe('applied');
    await writeTrust(t, { desired: [release] });
    expect((await refusedUntouched(t, flag, bySpare, 'UntrustedIntent')).message).toContain(spare.fingerprint);
    expect((await apply(t, flag, await signed(t, text, release))).outcome).toBe('applied');
  });
});

describe('a host that does not require signed intent', () => {
  it('without trust settings acts on unsigned intent as before', async () => {
    const t = await makeNode();
    const [write] = await planned(t, desiredText(t));
    expect((await apply(t, write)).outcome).toBe('applied');
  });

  it('that lists keys accepts unsigned intent, and still refuses a signature that does not verify', async () => {
    const t = await trustingNode({ require: false });
    const text = desiredText(t);
    const [write, flag] = await planned(t, text);
    expect((await apply(t, write)).outcome).toBe('applied');
    await refusedUntouched(t, flag, await signed(t, text, stranger), 'UntrustedIntent');
  });
});
