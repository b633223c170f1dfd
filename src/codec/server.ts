import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Payload } from '@temporalio/common';
import { withFix } from '../contract/fix';
import { AesGcmCodec, PayloadDecryptionError } from './aes-gcm';
import type { Keyring } from './keyring';

/*
 * `datum codec-server`: the Temporal codec server protocol, so the Web UI and the `temporal`
 * CLI (`--codec-endpoint`) show decrypted payloads to an authorized user. POST /encode and
 * POST /decode take and return {"payloads": [{"metadata": {k: base64}, "data": base64}]}, with
 * the namespace in X-Namespace. Every request needs `Authorization: Bearer <token>` with one of
 * the configured tokens; browsers may call it only from the configured Web UI origins (CORS).
 * Nothing it decodes is logged: a line per request says who asked for how many payloads.
 */

export interface CodecServerOptions {
  keyring: Keyring;
  /** Bearer tokens accepted; at least one (a codec server without authorization decrypts for anyone). */
  tokens: string[];
  /** Default 127.0.0.1 (put a TLS proxy in front to serve others). */
  host?: string;
  /** Default 8888; 0 picks a free port. */
  port?: number;
  /** Browser origins allowed to call it (the Web UI's), e.g. http://localhost:8233. */
  allowedOrigins?: string[];
  /** When given, only these namespaces (X-Namespace) are served. */
  namespaces?: string[];
  /** One line per request and start-up; default: stderr. */
  log?: (line: string) => void;
}

export interface RunningCodecServer {
  /** e.g. http://127.0.0.1:8888: what --ui-codec-endpoint and --codec-endpoint take. */
  url: string;
  close(): Promise<void>;
}

/** At most this many bytes in one request body: a batch of Temporal's 2 MiB payloads. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const digest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

/** Starts the codec server; resolves once it listens. */
export async function runCodecServer(options: CodecServerOptions): Promise<RunningCodecServer> {
  const tokens = options.tokens.map((t) => t.trim()).filter((t) => t.length > 0);
  if (tokens.length === 0)
    throw new Error(
      withFix(
        'the codec server has no authorization token, and would decrypt payloads for anyone who can reach it',
        'set DATUM_CODEC_SERVER_TOKEN (or DATUM_CODEC_SERVER_TOKEN_FILE) to a long random secret',
      ),
    );
  const handler = new CodecHandler(options, tokens.map(digest));
  const server = createServer((req, res) => void handler.handle(req, res));
  await listen(server, options.host ?? '127.0.0.1', options.port ?? 8888);
  const { address, port } = server.address() as AddressInfo;
  const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
  handler.log(
    `datum codec-server: ${url} (keys ${[...options.keyring.keys.keys()].join(', ')}, active ${options.keyring.activeKeyId})`,
  );
  return {
    url,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new Error(withFix(`the codec server cannot listen on ${host}:${port}: the port is in use`, 'choose another port'))
          : error,
      ),
    );
    server.listen(port, host, () => resolve());
  });
}

class CodecHandler {
  private readonly codec: AesGcmCodec;
  readonly log: (line: string) => void;

  constructor(
    private readonly options: CodecServerOptions,
    private readonly tokenDigests: Buffer[],
  ) {
    this.codec = new AesGcmCodec(options.keyring);
    this.log = options.log ?? ((line) => process.stderr.write(`${line}\n`));
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const namespace = header(req, 'x-namespace') ?? '-';
    let count = 0;
    try {
      this.cors(req, res);
      if (req.method === 'OPTIONS') return this.reply(res, 204);
      const route = this.route(req);
      this.authorize(req, namespace);
      const payloads = await readPayloads(req);
      count = payloads.length;
      const out = route === 'encode' ? await this.codec.encode(payloads) : await this.codec.decode(payloads);
      this.reply(res, 200, { payloads: out.map(toJson) });
    } catch (error) {
      const status = error instanceof HttpError ? error.status : error instanceof PayloadDecryptionError ? 422 : 500;
      this.reply(res, status, { error: (error as Error).message }, status === 401);
    } finally {
      this.log(`datum codec-server: ${req.method} ${req.url} namespace ${namespace}: ${res.statusCode}, ${count} payloads`);
    }
  }

  /** Browsers get CORS headers only for the Web UI's origins; any other origin is refused. */
  private cors(req: IncomingMessage, res: ServerResponse): void {
    const origin = header(req, 'origin');
    if (origin === undefined) return;
    if (!(this.options.allowedOrigins ?? []).includes(origin))
      throw new HttpError(
        403,
        withFix(
          `origin ${origin} may not call this codec server`,
          'add the Web UI origin to DATUM_CODEC_SERVER_ORIGINS (e.g. http://localhost:8233)',
        ),
      );
    res.setHeader('Access-Control-Allow-Origin', origin);
    res.setHeader('Vary', 'Origin');
    res.setHeader('Access-Control-Allow-Credentials', 'true');
    res.setHeader('Access-Control-Allow-Methods', 'POST, OPTIONS');
    res.setHeader('Access-Control-Allow-Headers', 'Authorization, Content-Type, X-Namespace');
    res.setHeader('Access-Control-Max-Age', '600');
  }

  private route(req: IncomingMessage): 'encode' | 'decode' {
    const path = (req.url ?? '').split('?')[0].replace(/\/+$/, '');
    const route = path.endsWith('/encode') ? 'encode' : path.endsWith('/decode') ? 'decode' : undefined;
    if (route === undefined) throw new HttpError(404, 'no such endpoint: POST /encode or POST /decode');
    if (req.method !== 'POST') throw new HttpError(405, `${req.method} ${path}: only POST is served`);
    return route;
  }

  private authorize(req: IncomingMessage, namespace: string): void {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header(req, 'authorization') ?? '');
    const given = match ? digest(match[1]) : undefined;
    if (!given || !this.tokenDigests.some((d) => timingSafeEqual(d, given)))
      throw new HttpError(
        401,
        withFix(
          match ? 'the bearer token is not one this codec server accepts' : 'no bearer token (Authorization: Bearer <token>)',
          'send the token from DATUM_CODEC_SERVER_TOKEN: `temporal … --codec-auth "Bearer <token>"`',
        ),
      );
    const namespaces = this.options.namespaces;
    if (namespaces && !namespaces.includes(namespace))
      throw new HttpError(403, `namespace ${namespace} is not served here (serves ${namespaces.join(', ')})`);
  }

  private reply(res: ServerResponse, status: number, body?: unknown, challenge = false): void {
    if (challenge) res.setHeader('WWW-Authenticate', 'Bearer realm="datum-codec"');
    if (body === undefined) {
      res.writeHead(status).end();
      return;
    }
    res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function readPayloads(req: IncomingMessage): Promise<Payload[]> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `the request body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new HttpError(400, 'the body is not JSON: send {"payloads": [{"metadata": {…}, "data": "<base64>"}]}');
  }
  const payloads = (body as { payloads?: unknown } | null)?.payloads;
  if (!Array.isArray(payloads)) throw new HttpError(400, 'the body has no "payloads" array');
  return payloads.map(fromJson);
}

/** A payload in proto3 JSON form: bytes are base64. */
interface JsonPayload {
  metadata?: Record<string, string>;
  data?: string;
}

function fromJson(value: unknown, index: number): Payload {
  const p = value as JsonPayload | null;
  const metadata = p?.metadata ?? {};
  const ok =
    typeof p === 'object' &&
    p !== null &&
    (p.data === undefined || typeof p.data === 'string') &&
    typeof metadata === 'object' &&
    Object.values(metadata).every((v) => typeof v === 'string');
  if (!ok) throw new HttpError(400, `payloads[${index}] is not {"metadata": {name: base64}, "data": base64}`);
  return {
    metadata: Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
    data: Buffer.from(p.data ?? '', 'base64'),
  };
}

function toJson(payload: Payload): JsonPayload {
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(payload.metadata ?? {})) metadata[k] = Buffer.from(v ?? []).toString('base64');
  return { metadata, data: Buffer.from(payload.data ?? []).toString('base64') };
}
