// What the tracing tests share: a small OTLP/HTTP receiver (JSON bodies, the encoding Datum's
// exporter sends), and real `datum` processes with their output kept.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import net from 'node:net';

import { DATUM } from '../helpers/cli';

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  startNs: bigint;
  attributes: Record<string, unknown>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpKeyValue {
  key: string;
  value: OtlpValue;
}
interface OtlpTraces {
  resourceSpans: Array<{
    resource: { attributes: OtlpKeyValue[] };
    scopeSpans: Array<{
      spans: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        startTimeUnixNano: string;
        attributes?: OtlpKeyValue[];
      }>;
    }>;
  }>;
}

const valueOf = (v: OtlpValue): unknown => v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue;
const attributesOf = (kvs: OtlpKeyValue[] = []) => Object.fromEntries(kvs.map((kv) => [kv.key, valueOf(kv.value)]));

/** An OTLP/HTTP collector that keeps every span POSTed to /v1/traces as JSON. */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Requests it could not read as OTLP JSON (a test fails on any). */
  readonly rejected: string[] = [];

  private readonly server: Server;
  private port = 0;

  private constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (
          req.method !== 'POST' ||
          req.url !== '/v1/traces' ||
          !String(req.headers['content-type']).startsWith('application/json')
        ) {
          this.rejected.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
          res.writeHead(404).end();
          return;
        }
        this.take(JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpTraces);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
  }

  static async start(): Promise<OtlpReceiver> {
    const receiver = new OtlpReceiver();
    await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
    receiver.port = (receiver.server.address() as net.AddressInfo).port;
    return receiver;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private take(traces: OtlpTraces): void {
    for (const rs of traces.resourceSpans ?? []) {
      const service = String(attributesOf(rs.resource.attributes)['service.name']);
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          this.spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ? s.parentSpanId : null,
            name: s.name,
            startNs: BigInt(s.startTimeUnixNano),
            attributes: attributesOf(s.attributes),
          });
    }
  }

  /** The span's ancestors and itself, root first, as "service name" lines. */
  lineage(span: ReceivedSpan): string[] {
    const byId = new Map(this.spans.map((s) => [s.spanId, s]));
    const out: string[] = [];
    for (let s: ReceivedSpan | undefined = span; s; s = s.parentSpanId ? byId.get(s.parentSpanId) : undefined) {
      out.unshift(`${s.service} ${s.name}`);
      if (s.parentSpanId && !byId.has(s.parentSpanId)) out.unshift(`(missing parent ${s.parentSpanId})`);
    }
    return out;
  }

  children(span: ReceivedSpan, name?: string): ReceivedSpan[] {
    return this.spans
      .filter((s) => s.parentSpanId === span.spanId && (name === undefined || s.name === name))
      .sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A port nothing listens on: bound, then released. */
export async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** A `datum` process and everything it wrote (stdout and stderr, in order). */
export class DatumProcess {
  readonly out: string[] = [];
  readonly exited: Promise<number | null>;
  private readonly child: ChildProcess;

  constructor(args: string[], env: NodeJS.ProcessEnv) {
    this.child = spawn(process.execPath, [DATUM, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (d: Buffer) => this.out.push(d.toString('utf8')));
    this.child.stderr!.on('data', (d: Buffer) => this.out.push(d.toString('utf8')));
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
  }

  lines(): string[] {
    return this.out
      .join('')
      .split('\n')
      .filter((l) => l.trim() !== '');
  }

  /** The JSON log lines (every line but the start-up banner). */
  logLines(): Array<Record<string, unknown>> {
    return this.lines()
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }

  /** SIGTERM, as a unit or a container stop sends it; resolves with the exit code. */
  async stop(): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }
}
