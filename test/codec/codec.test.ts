import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AesGcmCodec,
  CodecConfigError,
  ENCRYPTED_ENCODING,
  KEY_ID_METADATA,
  PayloadDecryptionError,
  codecDataConverter,
  loadKeyring,
} from '../../src/codec';
import { refuseSensitiveInClear } from '../../src/codec/sensitive';
import type { AuthorityRead } from '../../src/contract';

/*
 * The payload codec on its own: AES-256-GCM by key id, rotation, and every way a payload or a
 * keyring can be wrong. Each refusal names the key id, and nothing is ever decoded wrongly.
 */

const SECRET = { password: 'hunter2-correct-horse' };
const newKey = () => randomBytes(32).toString('base64');

let dir: string;
const writeJson = async (name: string, keys: Record<string, string>): Promise<string> => {
  const file = path.join(dir, name);
  await fs.writeFile(file, JSON.stringify(keys));
  return file;
};
const text = (b: Uint8Array | null | undefined) => Buffer.from(b ?? []).toString('utf8');
const plain = (): Payload => defaultPayloadConverter.toPayload(SECRET);

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-codec-'));
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

describe('AES-256-GCM payload codec', () => {
  it('stores only ciphertext marked binary/encrypted with its key id and nonce, and decodes it back', async () => {
    const codec = new AesGcmCodec(loadKeyring(await writeJson('one.json', { k1: newKey() })));
    const [a] = await codec.encode([plain()]);
    const [b] = await codec.encode([plain()]);
    expect(text(a.metadata!.encoding)).toBe(ENCRYPTED_ENCODING);
    expect(text(a.metadata![KEY_ID_METADATA])).toBe('k1');
    expect(a.metadata!['encryption-nonce']).toHaveLength(12);
    expect(text(a.data)).not.toContain('hunter2');
    // A fresh nonce per payload: the same value never encrypts to the same bytes.
    expect(Buffer.from(a.data!).equals(Buffer.from(b.data!))).toBe(false);
    const [decoded] = await codec.decode([a]);
    expect(defaultPayloadConverter.fromPayload(decoded)).toEqual(SECRET);
  });

  it('after a rotation, payloads of the old key still decode and new ones use the new key', async () => {
    const k1 = newKey();
    const before = new AesGcmCodec(loadKeyring(await writeJson('before.json', { k1 })));
    const [old] = await before.encode([plain()]);
    const after = new AesGcmCodec(loadKeyring(await writeJson('after.json', { k1, k2: newKey() }), 'k2'));
    const [fresh] = await after.encode([plain()]);
    expect(text(fresh.metadata![KEY_ID_METADATA])).toBe('k2');
    const decoded = await after.decode([old, fresh]);
    expect(decoded.map((p) => defaultPayloadConverter.fromPayload(p))).toEqual([SECRET, SECRET]);
  });

  it('refuses a payload whose key id is not in the keyring, naming the id', async () => {
    const [old] = await new AesGcmCodec(loadKeyring(await writeJson('k1.json', { k1: newKey() }))).encode([plain()]);
    const dropped = new AesGcmCodec(loadKeyring(await writeJson('k2.json', { k2: newKey() })));
    const refusal = await dropped.decode([old]).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(PayloadDecryptionError);
    expect((refusal as Error).message).toMatch(
      /encrypted with key "k1", which the codec keyring .*k2\.json does not hold \(it holds k2\)/,
    );
    expect((refusal as PayloadDecryptionError).keyId).toBe('k1');
  });

  it('refuses a payload under a wrong key of the same id, and an altered one, naming the id', async () => {
    const [sealed] = await new AesGcmCodec(loadKeyring(await writeJson('right.json', { k1: newKey() }))).encode([plain()]);
    const wrong = new AesGcmCodec(loadKeyring(await writeJson('wrong.json', { k1: newKey() })));
    await expect(wrong.decode([sealed])).rejects.toThrow(
      /key "k1": it does not authenticate under the key "k1" in .*wrong\.json/,
    );

    const right = new AesGcmCodec(loadKeyring(path.join(dir, 'right.json')));
    const altered = { ...sealed, data: Buffer.from(sealed.data!).fill(0, 0, 1) };
    await expect(right.decode([altered])).rejects.toThrow(/does not authenticate/);
    // The key id is authenticated too: a payload relabelled to another key in the ring fails.
    const both = new AesGcmCodec(loadKeyring(await writeJson('both.json', { k1: newKey(), k2: newKey() }), 'k1'));
    const [mine] = await both.encode([plain()]);
    const relabelled = { ...mine, metadata: { ...mine.metadata, [KEY_ID_METADATA]: Buffer.from('k2') } };
    await expect(both.decode([relabelled])).rejects.toThrow(/key "k2": it does not authenticate/);
  });

  it('passes a payload written in clear through (before the codec was switched on)', async () => {
    const codec = new AesGcmCodec(loadKeyring(await writeJson('clear.json', { k1: newKey() })));
    const [decoded] = await codec.decode([plain()]);
    expect(defaultPayloadConverter.fromPayload(decoded)).toEqual(SECRET);
  });

  it('reads a directory keyring (a mounted Secret), skipping its ..data entries', async () => {
    const keys = path.join(dir, 'keys.d');
    await fs.mkdir(path.join(keys, '..data'), { recursive: true });
    await fs.writeFile(path.join(keys, '2026-01.key'), `${newKey()}\n`);
    await fs.writeFile(path.join(keys, '2026-07'), newKey());
    const ring = loadKeyring(keys, '2026-07');
    expect([...ring.keys.keys()]).toEqual(['2026-01', '2026-07']);
  });
});

describe('codec configuration', () => {
  const env = (vars: Record<string, string>) => vars as NodeJS.ProcessEnv;

  it('is off without DATUM_CODEC_KEYS, and refuses a key id without a keyring', () => {
    expect(codecDataConverter(env({}))).toBeUndefined();
    expect(() => codecDataConverter(env({ DATUM_CODEC_KEY_ID: 'k1' }))).toThrow(
      /DATUM_CODEC_KEY_ID is set but DATUM_CODEC_KEYS is not/,
    );
  });

  it.each([
    [
      'a missing keyring',
      () => Promise.resolve(path.join(dir, 'absent.json')),
      undefined,
      /cannot read the codec keyring .*absent\.json/,
    ],
    [
      'a key that is not 32 bytes',
      () => writeJson('short.json', { k1: Buffer.alloc(16).toString('base64') }),
      undefined,
      /key "k1" is not the base64 of 32 bytes/,
    ],
    [
      'an active key id the keyring lacks',
      () => writeJson('lacks.json', { k1: newKey() }),
      'k9',
      /names key "k9", which the codec keyring .* does not hold \(it holds k1\)/,
    ],
    [
      'two keys and no active id',
      () => writeJson('two.json', { k1: newKey(), k2: newKey() }),
      undefined,
      /holds 2 keys \(k1, k2\) and DATUM_CODEC_KEY_ID does not say/,
    ],
    ['a bad key id', () => writeJson('id.json', { 'k 1': newKey() }), undefined, /"k 1" is not a usable key id/],
  ])('refuses %s with the fix', async (_name, file, active, message) => {
    const vars: Record<string, string> = { DATUM_CODEC_KEYS: await file() };
    if (active) vars.DATUM_CODEC_KEY_ID = active;
    expect(() => codecDataConverter(env(vars))).toThrow(CodecConfigError);
    expect(() => codecDataConverter(env(vars))).toThrow(message);
    expect(() => codecDataConverter(env(vars))).toThrow(/fix: /);
  });
});

describe('sensitive files without the codec', () => {
  const read: AuthorityRead = {
    ok: true,
    intent: {
      node: 'N-1',
      generation: 1,
      resources: { secret: { type: 'file', path: 'etc/secret', content: 'hunter2', sensitive: true } },
      provenance: { source: 'desired/nodes/N-1.yaml', revision: 'sha256:x', author: null, loaded_at: '2026-01-01T00:00:00Z' },
    } as unknown as Extract<AuthorityRead, { ok: true }>['intent'],
  };

  it('are refused before their content enters history, naming the resource and the fix', () => {
    const refused = refuseSensitiveInClear(read, false);
    expect(refused).toMatchObject({ ok: false, kind: 'invalid' });
    expect(!refused.ok && refused.error).toMatch(
      /resources\.secret is marked sensitive: true, but this controller worker has no payload codec .*fix: /,
    );
    expect(JSON.stringify(refused)).not.toContain('hunter2');
  });

  it('pass with the codec on', () => {
    expect(refuseSensitiveInClear(read, true)).toBe(read);
  });
});
