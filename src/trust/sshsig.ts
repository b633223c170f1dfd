import { createHash, createPublicKey, verify, type KeyObject } from 'node:crypto';
import { withFix } from '../contract/fix';
import { MAX_SIGNATURE_BYTES } from '../contract/trust';

/*
 * OpenSSH public keys and SSH signatures (`ssh-keygen -Y sign`, the format git signs commits
 * with), read here and checked with node:crypto. Only the formats are parsed here, from their
 * specifications (OpenSSH PROTOCOL.sshsig, RFC 4251 §5 for the wire types, RFC 8709 for
 * ssh-ed25519): the check itself is crypto.verify with an Ed25519 public key. Only ssh-ed25519
 * is accepted: one algorithm, no parameters to get wrong, and what `ssh-keygen -t ed25519` makes.
 */

const KEY_TYPE = 'ssh-ed25519';
const MAGIC = Buffer.from('SSHSIG');
const ARMOR_BEGIN = '-----BEGIN SSH SIGNATURE-----';
const ARMOR_END = '-----END SSH SIGNATURE-----';
const HASHES = ['sha256', 'sha512'] as const;
const ED25519_KEY_BYTES = 32;
const ED25519_SIGNATURE_BYTES = 64;

/** A public key a host trusts, as its agent.yaml lists it. */
export interface PublicKey {
  /** The SSH wire encoding of the key (string "ssh-ed25519", string key). */
  blob: Buffer;
  /** What follows the key on its line, such as release@ci. */
  comment: string;
  /** As `ssh-keygen -l` prints it: SHA256:<base64 of the blob's sha256, unpadded>. */
  fingerprint: string;
  key: KeyObject;
}

/** What is wrong with a key line, a signature or a check, in Datum's "<problem> — fix: <fix>" shape. */
export class SignatureProblem extends Error {
  constructor(
    readonly check: 'malformed' | 'namespace' | 'untrusted' | 'mismatch',
    readonly problem: string,
    readonly fix: string,
  ) {
    super(withFix(problem, fix));
    this.name = 'SignatureProblem';
  }
}

const malformed = (problem: string, fix: string) => new SignatureProblem('malformed', problem, fix);

/** RFC 4251 wire types, read with bounds checks: a length past the end is a malformed blob, never a crash. */
class WireReader {
  private at = 0;
  constructor(
    private readonly bytes: Buffer,
    private readonly what: string,
  ) {}

  take(n: number): Buffer {
    if (n < 0 || this.at + n > this.bytes.length)
      throw malformed(`${this.what} ends early`, 'use the file as ssh-keygen wrote it');
    const out = this.bytes.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }

  uint32(): number {
    return this.take(4).readUInt32BE(0);
  }

  string(): Buffer {
    return this.take(this.uint32());
  }

  text(): string {
    return this.string().toString('latin1');
  }

  end(): void {
    if (this.at !== this.bytes.length)
      throw malformed(
        `${this.what} has ${this.bytes.length - this.at} bytes after its end`,
        'use the file as ssh-keygen wrote it',
      );
  }
}

const wireString = (bytes: Buffer) => {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length, 0);
  return Buffer.concat([length, bytes]);
};

/** Strict base64: what Buffer.from would silently skip (spaces, stray characters) is refused. */
function base64(text: string, what: string): Buffer {
  const bytes = /^[A-Za-z0-9+/]*={0,2}$/.test(text) && text.length % 4 === 0 ? Buffer.from(text, 'base64') : null;
  if (bytes === null || bytes.toString('base64') !== text)
    throw malformed(`${what} is not base64`, 'copy it whole, as ssh-keygen wrote it');
  return bytes;
}

/** The Ed25519 key in an ssh-ed25519 blob. */
function ed25519Key(blob: Buffer, what: string): KeyObject {
  const wire = new WireReader(blob, what);
  const type = wire.text();
  if (type !== KEY_TYPE)
    throw malformed(
      `${what} is a ${type} key, and Datum accepts ${KEY_TYPE} keys only`,
      'make an Ed25519 key (ssh-keygen -t ed25519 -f <file>) and use it',
    );
  const raw = wire.string();
  wire.end();
  if (raw.length !== ED25519_KEY_BYTES)
    throw malformed(`${what} holds ${raw.length} key bytes, not ${ED25519_KEY_BYTES}`, 'copy the key line whole');
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

export function fingerprintOf(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** One OpenSSH public key line ("ssh-ed25519 AAAA… release@ci", as in a .pub file); throws SignatureProblem. */
export function parsePublicKey(line: string): PublicKey {
  const [type, encoded, ...comment] = line.trim().split(/\s+/);
  if (type !== KEY_TYPE)
    throw malformed(
      `"${line.slice(0, 40)}" is not an ${KEY_TYPE} public key`,
      `write the key as its .pub file holds it: ${KEY_TYPE} AAAA… comment (ssh-keygen -t ed25519 makes one)`,
    );
  if (encoded === undefined) throw malformed(`the ${KEY_TYPE} key has no key after its type`, 'copy the key line whole');
  const blob = base64(encoded, `the ${KEY_TYPE} key`);
  return { blob, comment: comment.join(' '), fingerprint: fingerprintOf(blob), key: ed25519Key(blob, 'the key') };
}

/** An SSH signature as PROTOCOL.sshsig lays it out. */
interface Sshsig {
  signer: Buffer;
  namespace: string;
  reserved: Buffer;
  hash: (typeof HASHES)[number];
  signature: Buffer;
}

/** The armored signature `ssh-keygen -Y sign` writes; throws SignatureProblem. */
export function parseSignature(armored: string): Sshsig {
  const fix = 'sign the file again (datum sign, or ssh-keygen -Y sign)';
  if (armored.length > MAX_SIGNATURE_BYTES)
    throw malformed(`the signature is ${armored.length} bytes, more than the ${MAX_SIGNATURE_BYTES} an SSH signature takes`, fix);
  const lines = armored.trim().split(/\r?\n/);
  if (lines[0] !== ARMOR_BEGIN || lines[lines.length - 1] !== ARMOR_END)
    throw malformed(`the signature is not an SSH signature (${ARMOR_BEGIN} … ${ARMOR_END})`, fix);
  const wire = new WireReader(base64(lines.slice(1, -1).join(''), 'the signature'), 'the signature');
  if (!wire.take(MAGIC.length).equals(MAGIC)) throw malformed('the signature does not start with SSHSIG', fix);
  const version = wire.uint32();
  if (version !== 1) throw malformed(`the signature is of version ${version}, and Datum reads version 1`, fix);
  const signer = wire.string();
  const namespace = wire.text();
  const reserved = wire.string();
  const hash = wire.text();
  const signed = wire.string();
  wire.end();
  if (!(HASHES as readonly string[]).includes(hash)) throw malformed(`the signature hashes with "${hash}"`, fix);
  const inner = new WireReader(signed, 'the signature');
  const type = inner.text();
  const signature = inner.string();
  inner.end();
  if (type !== KEY_TYPE) throw malformed(`the signature was made by a ${type} key, and Datum accepts ${KEY_TYPE} keys only`, fix);
  if (signature.length !== ED25519_SIGNATURE_BYTES)
    throw malformed(`the signature holds ${signature.length} bytes, not ${ED25519_SIGNATURE_BYTES}`, fix);
  return { signer, namespace, reserved, hash: hash as Sshsig['hash'], signature };
}

/**
 * Checks that `armored` is a signature over exactly `message`, for `namespace`, by one of
 * `trusted`; returns that key, or throws SignatureProblem saying which check failed.
 * `whose` names the agent.yaml list the fix points at.
 */
export function verifySignature(
  message: Buffer,
  armored: string,
  namespace: string,
  trusted: PublicKey[],
  whose: string,
): PublicKey {
  const sig = parseSignature(armored);
  if (sig.namespace !== namespace)
    throw new SignatureProblem(
      'namespace',
      `the signature is for namespace "${sig.namespace}", not "${namespace}"`,
      `sign it for ${namespace} (ssh-keygen -Y sign -n ${namespace})`,
    );
  const key = trusted.find((k) => k.blob.equals(sig.signer));
  if (!key) {
    const fingerprint = fingerprintOf(sig.signer);
    throw new SignatureProblem(
      'untrusted',
      `it is signed by key ${fingerprint}, which this host does not trust (${whose} lists ${trusted.length === 0 ? 'no key' : trusted.map((k) => k.fingerprint).join(', ')})`,
      `sign it with a key ${whose} lists, or an operator on the node adds that key's public line there`,
    );
  }
  const digest = createHash(sig.hash).update(message).digest();
  const data = Buffer.concat([
    MAGIC,
    wireString(Buffer.from(namespace)),
    wireString(sig.reserved),
    wireString(Buffer.from(sig.hash)),
    wireString(digest),
  ]);
  if (!verify(null, data, key.key, sig.signature))
    throw new SignatureProblem(
      'mismatch',
      `the signature by ${key.fingerprint} does not match these bytes: they changed after signing, or another file was signed`,
      'sign the file as it is now (datum sign), or restore the bytes that were signed',
    );
  return key;
}
