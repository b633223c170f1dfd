import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DESIRED_NAMESPACE } from '../../src/contract';
import { SignatureProblem, parsePublicKey, parseSignature, verifySignature, type PublicKey } from '../../src/trust/sshsig';
import { makeKey, sshSign, type SshKey } from '../helpers/ssh-keys';

/*
 * The SSH signature format as ssh-keygen writes it (-Y sign), read and checked by Datum: the
 * signature of the real tool verifies, and every way a signature can be wrong is told apart.
 */

let dir: string;
let release: SshKey;
let other: SshKey;
let trusted: PublicKey[];
let doc: string;
let bytes: Buffer;
let signature: string;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-sshsig-'));
  [release, other] = await Promise.all([makeKey(dir, 'release@ci'), makeKey(dir, 'someone-else')]);
  trusted = [parsePublicKey(release.line)];
  doc = path.join(dir, 'N-24.yaml');
  bytes = Buffer.from('node: N-24\ngeneration: 12\nresources: {}\n');
  await fs.writeFile(doc, bytes);
  signature = await sshSign(release, DESIRED_NAMESPACE, doc);
});
afterAll(async () => await fs.rm(dir, { recursive: true, force: true }));

const problemOf = (f: () => unknown): SignatureProblem => {
  try {
    f();
  } catch (error) {
    if (error instanceof SignatureProblem) return error;
    throw error;
  }
  throw new Error('expected a SignatureProblem');
};

describe('SSH signatures (ssh-keygen -Y sign)', () => {
  it('a key line reads with the fingerprint ssh-keygen -l prints, and a signature of ssh-keygen verifies', () => {
    expect(trusted[0]).toMatchObject({ comment: 'release@ci', fingerprint: release.fingerprint });
    expect(verifySignature(bytes, signature, DESIRED_NAMESPACE, trusted, 'trust.desired').fingerprint).toBe(release.fingerprint);
    expect(parseSignature(signature)).toMatchObject({ namespace: DESIRED_NAMESPACE, hash: 'sha512' });
  });

  it('one byte changed after signing: mismatch', () => {
    const changed = Buffer.from(bytes);
    changed[changed.length - 2] ^= 1;
    const p = problemOf(() => verifySignature(changed, signature, DESIRED_NAMESPACE, trusted, 'trust.desired'));
    expect(p.check).toBe('mismatch');
    expect(p.message).toMatch(/does not match these bytes: they changed after signing.* — fix: sign the file as it is now/);
  });

  it('a key the host does not list: untrusted, named by its fingerprint', async () => {
    const sig = await sshSign(other, DESIRED_NAMESPACE, doc);
    const p = problemOf(() => verifySignature(bytes, sig, DESIRED_NAMESPACE, trusted, 'trust.desired'));
    expect(p.check).toBe('untrusted');
    expect(p.message).toContain(
      `signed by key ${other.fingerprint}, which this host does not trust (trust.desired lists ${release.fingerprint})`,
    );
    // Restored for the other tests.
    signature = await sshSign(release, DESIRED_NAMESPACE, doc);
  });

  it('a signature made for another namespace (git, file) never stands for desired state', async () => {
    const sig = await sshSign(release, 'git', doc);
    expect(problemOf(() => verifySignature(bytes, sig, DESIRED_NAMESPACE, trusted, 'trust.desired')).check).toBe('namespace');
    signature = await sshSign(release, DESIRED_NAMESPACE, doc);
  });

  it('a signature whose bytes were tampered with, truncated or padded is malformed or fails, never throws anything else', () => {
    const body = signature.trim().split('\n');
    const raw = Buffer.from(body.slice(1, -1).join(''), 'base64');
    const armor = (b: Buffer) => `${body[0]}\n${b.toString('base64')}\n${body[body.length - 1]}\n`;
    const flipped = Buffer.from(raw);
    flipped[raw.length - 1] ^= 0xff;
    expect(problemOf(() => verifySignature(bytes, armor(flipped), DESIRED_NAMESPACE, trusted, 'x')).check).toBe('mismatch');
    for (const bad of [
      armor(raw.subarray(0, raw.length - 10)),
      armor(Buffer.concat([raw, Buffer.from([0])])),
      'not a signature',
      `${body[0]}\n!!!\n${body[body.length - 1]}`,
      'x'.repeat(10_000),
    ]) {
      expect(problemOf(() => verifySignature(bytes, bad, DESIRED_NAMESPACE, trusted, 'x')).check).toBe('malformed');
    }
  });

  it('only ssh-ed25519 keys: an RSA or ECDSA key line is refused with how to make an Ed25519 key', async () => {
    const rsa = await makeKey(dir, 'old', 'ecdsa');
    expect(problemOf(() => parsePublicKey(rsa.line)).message).toMatch(
      /is not an ssh-ed25519 public key — fix: .*ssh-keygen -t ed25519/,
    );
    expect(problemOf(() => parsePublicKey('ssh-ed25519 AAAA')).check).toBe('malformed');
    expect(problemOf(() => parsePublicKey('ssh-ed25519')).check).toBe('malformed');
    // A valid base64 blob of another type, relabelled as ed25519, is caught by the blob itself.
    const ecdsaBlob = rsa.line.split(' ')[1];
    expect(problemOf(() => parsePublicKey(`ssh-ed25519 ${ecdsaBlob}`)).message).toContain('is a ecdsa-sha2-nistp256 key');
  });
});
