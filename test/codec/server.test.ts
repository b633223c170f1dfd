import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AesGcmCodec, loadKeyring } from '../../src/codec';
import { runCodecServer, type RunningCodecServer } from '../../src/codec/server';
import { newKey } from './harness';

/*
 * `datum codec-server` over real HTTP: the Temporal codec server protocol for an authorized
 * caller, and a refusal, with the reason, for everyone else.
 */

const TOKEN = 'codec-token-for-tests-0123456789';
const UI = 'http://127.0.0.1:8233';
const SECRET = { password: 'hunter2' };

let dir: string;
let server: RunningCodecServer;
let codec: AesGcmCodec;
const lines: string[] = [];

const wire = (p: Payload) => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  data: Buffer.from(p.data ?? []).toString('base64'),
});
const fromWire = (p: { metadata: Record<string, string>; data: string }): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data, 'base64'),
});

function post(route: string, payloads: Payload[], headers: Record<string, string> = {}) {
  return fetch(`${server.url}${route}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Namespace': 'default', ...headers },
    body: JSON.stringify({ payloads: payloads.map(wire) }),
  });
}

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-codec-server-'));
  await fs.writeFile(path.join(dir, 'keys.json'), JSON.stringify({ k1: newKey() }));
  const keyring = loadKeyring(path.join(dir, 'keys.json'));
  codec = new AesGcmCodec(keyring);
  server = await runCodecServer({ keyring, tokens: [TOKEN], port: 0, allowedOrigins: [UI], log: (l) => lines.push(l) });
});

afterAll(async () => {
  await server?.close();
  await fs.rm(dir, { recursive: true, force: true });
});

describe('codec server', () => {
  it('decodes for a caller with the bearer token, and encodes too', async () => {
    const sealed = await codec.encode([defaultPayloadConverter.toPayload(SECRET)]);
    const res = await post('/decode', sealed, { Authorization: `Bearer ${TOKEN}` });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { payloads: Array<{ metadata: Record<string, string>; data: string }> };
    expect(defaultPayloadConverter.fromPayload(fromWire(body.payloads[0]))).toEqual(SECRET);

    const encoded = await post('/encode', [defaultPayloadConverter.toPayload(SECRET)], { Authorization: `Bearer ${TOKEN}` });
    const out = (await encoded.json()) as { payloads: Array<{ metadata: Record<string, string>; data: string }> };
    expect(Buffer.from(out.payloads[0].metadata.encoding, 'base64').toString()).toBe('binary/encrypted');
    const [back] = await codec.decode([fromWire(out.payloads[0])]);
    expect(defaultPayloadConverter.fromPayload(back)).toEqual(SECRET);
    // The log says who asked for how much, never what was decoded.
    expect(lines.join('\n')).toMatch(/POST \/decode namespace default: 200, 1 payloads/);
    expect(lines.join('\n')).not.toContain('hunter2');
  });

  it.each([
    ['no token', {}, 401, /no bearer token/],
    ['a wrong token', { Authorization: 'Bearer not-the-token' }, 401, /not one this codec server accepts/],
    ['a token in the wrong scheme', { Authorization: `Basic ${TOKEN}` }, 401, /no bearer token/],
    [
      'another origin',
      { Authorization: `Bearer ${TOKEN}`, Origin: 'http://evil.example' },
      403,
      /origin http:\/\/evil\.example may not call/,
    ],
  ])('refuses %s and decodes nothing', async (_name, headers, status, message) => {
    const sealed = await codec.encode([defaultPayloadConverter.toPayload(SECRET)]);
    const res = await post('/decode', sealed, headers);
    expect(res.status).toBe(status);
    const text = await res.text();
    expect(text).toMatch(message);
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain(Buffer.from(JSON.stringify(SECRET)).toString('base64'));
  });

  it('refuses a payload under a key it does not hold, naming the key id', async () => {
    await fs.writeFile(path.join(dir, 'other.json'), JSON.stringify({ k9: newKey() }));
    const sealed = await new AesGcmCodec(loadKeyring(path.join(dir, 'other.json'))).encode([
      defaultPayloadConverter.toPayload(SECRET),
    ]);
    const res = await post('/decode', sealed, { Authorization: `Bearer ${TOKEN}` });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { error: string }).error).toMatch(
      /encrypted with key "k9", which the codec keyring .* does not hold/,
    );
  });

  it("answers the Web UI's preflight with CORS headers for its origin only", async () => {
    const preflight = await fetch(`${server.url}/decode`, {
      method: 'OPTIONS',
      headers: {
        Origin: UI,
        'Access-Control-Request-Method': 'POST',
        'Access-Control-Request-Headers': 'content-type,x-namespace,authorization',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(UI);
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    const refused = await fetch(`${server.url}/decode`, { method: 'OPTIONS', headers: { Origin: 'http://evil.example' } });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('will not start without a token', async () => {
    await expect(runCodecServer({ keyring: loadKeyring(path.join(dir, 'keys.json')), tokens: [' '], port: 0 })).rejects.toThrow(
      /no authorization token.*fix: set DATUM_CODEC_SERVER_TOKEN/,
    );
  });
});
