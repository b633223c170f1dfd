import { execFileSync } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, connectWorker } from '../../src/worker/connection';

/*
 * The Temporal Cloud profile (docs/production.md "Temporal Cloud"), as far as it can be tested without
 * the internet: an API key and TLS, from the environment or a temporal.toml profile, reach a
 * local TLS endpoint that stands where Cloud's would. The endpoint is a real HTTP/2 server with
 * a certificate from a CA made here; it records what each gRPC call carried and answers
 * UNAUTHENTICATED, as Cloud does for a key it does not know. Both of Datum's connections are
 * checked: the client's (CLI, rollouts) and the native one (worker, agent).
 */

interface Seen {
  path: string;
  authorization: string | undefined;
  namespace: string | undefined;
}

let dir: string;
let server: http2.Http2SecureServer;
let address: string;
const seen: Seen[] = [];
const sessions = new Set<http2.ServerHttp2Session>();

function makeCertificates(): void {
  const ssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=datum test CA',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
  ]);
  ssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=cloud.test', '-keyout', 'server.key', '-out', 'server.csr']);
  const ext = path.join(dir, 'ext.cnf');
  execFileSync('sh', ['-c', `printf 'subjectAltName=DNS:cloud.test,IP:127.0.0.1\\n' > "${ext}"`]);
  ssl([
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    ext,
    '-out',
    'server.pem',
  ]);
}

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-cloud-'));
  makeCertificates();
  server = http2.createSecureServer({
    key: readFileSync(path.join(dir, 'server.key')),
    cert: readFileSync(path.join(dir, 'server.pem')),
    allowHTTP1: false,
  });
  server.on('session', (session) => sessions.add(session));
  server.on('stream', (stream, headers) => {
    seen.push({
      path: String(headers[':path']),
      authorization: headers.authorization,
      namespace: headers['temporal-namespace'] as string | undefined,
    });
    stream.respond(
      {
        ':status': 200,
        'content-type': 'application/grpc',
        'grpc-status': '16',
        'grpc-message': 'unknown API key (local test endpoint)',
      },
      { endStream: true },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 60_000);
afterAll(async () => {
  for (const session of sessions) session.destroy();
  await new Promise((r) => server?.close(r));
  await fs.rm(dir, { recursive: true, force: true });
});

/** Runs `work` with only these TEMPORAL_* variables set. */
async function withEnv<T>(env: Record<string, string>, work: () => Promise<T>): Promise<T> {
  const saved = { ...process.env };
  for (const key of Object.keys(process.env)) if (key.startsWith('TEMPORAL_')) delete process.env[key];
  Object.assign(process.env, env);
  try {
    return await work();
  } finally {
    for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
    Object.assign(process.env, saved);
  }
}

describe('the Temporal Cloud profile, sent to a local TLS endpoint', () => {
  it('TEMPORAL_API_KEY and TLS from the environment: both connections send the key as a bearer token over TLS, and UNAUTHENTICATED comes back as an error', async () => {
    const env = {
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: 'datum-prod.a1b2c',
      TEMPORAL_API_KEY: 'test-api-key-1',
      TEMPORAL_TLS: 'true',
      TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(dir, 'ca.pem'),
      TEMPORAL_TLS_SERVER_NAME: 'cloud.test',
    };
    seen.length = 0;
    await withEnv(env, async () => {
      // Connection.connect asks GetSystemInfo and wraps the endpoint's answer as its cause.
      const refused = await connectClient().then(
        () => null,
        (error: Error & { cause?: unknown }) => `${error.message}: ${String(error.cause)}`,
      );
      expect(refused).toMatch(/unknown API key|UNAUTHENTICATED/i);
      await expect(connectWorker()).rejects.toThrow(/unknown API key|Unauthenticated|UNAUTHENTICATED/i);
    });
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen.every((s) => s.authorization === 'Bearer test-api-key-1')).toBe(true);
    expect(seen.some((s) => s.path.endsWith('/GetSystemInfo'))).toBe(true);
    expect(seen.filter((s) => s.namespace !== undefined).every((s) => s.namespace === 'datum-prod.a1b2c')).toBe(true);
  }, 60_000);

  it('the same from a temporal.toml profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE)', async () => {
    const toml = path.join(dir, 'temporal.toml');
    await fs.writeFile(
      toml,
      [
        '[profile.cloud]',
        `address = "${address}"`,
        'namespace = "datum-prod.a1b2c"',
        'api_key = "test-api-key-2"',
        '[profile.cloud.tls]',
        `server_ca_cert_path = "${path.join(dir, 'ca.pem')}"`,
        'server_name = "cloud.test"',
        '',
      ].join('\n'),
    );
    seen.length = 0;
    await withEnv({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'cloud' }, async () => {
      await expect(connectWorker()).rejects.toThrow(/unknown API key|Unauthenticated|UNAUTHENTICATED/i);
    });
    expect(seen.length).toBeGreaterThanOrEqual(1);
    expect(seen.every((s) => s.authorization === 'Bearer test-api-key-2')).toBe(true);
  }, 60_000);

  it('a CA the endpoint was not signed by: the TLS handshake fails and no key is sent', async () => {
    const otherCa = path.join(dir, 'other-ca.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=another CA',
        '-keyout',
        path.join(dir, 'other.key'),
        '-out',
        otherCa,
      ],
      { stdio: 'pipe' },
    );
    seen.length = 0;
    await withEnv(
      {
        TEMPORAL_ADDRESS: address,
        TEMPORAL_API_KEY: 'never-sent',
        TEMPORAL_TLS_SERVER_CA_CERT_PATH: otherCa,
        TEMPORAL_TLS_SERVER_NAME: 'cloud.test',
      },
      async () => {
        await expect(connectWorker()).rejects.toThrow();
      },
    );
    expect(seen).toEqual([]);
  }, 60_000);

  it('a CA file that does not exist is refused before any connection, naming the file', async () => {
    const missing = path.join(dir, 'no-such-ca.pem');
    await withEnv({ TEMPORAL_ADDRESS: address, TEMPORAL_API_KEY: 'k', TEMPORAL_TLS_SERVER_CA_CERT_PATH: missing }, async () => {
      await expect(connectWorker()).rejects.toThrow(new RegExp(missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    });
  }, 60_000);
});
