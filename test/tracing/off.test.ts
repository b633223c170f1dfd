import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracingConfig } from '../../src/tracing/config';
import { projectRoot } from '../../src/worker/paths';
import { DATUM } from '../helpers/cli';
import { closedPort } from './helpers';

/*
 * Tracing off by default, and the OTEL_* settings as Datum reads them: what turns it on, where
 * spans go, and the warning each setting Datum cannot honour gets. Then, on the real `datum`
 * command: with tracing off no process loads OpenTelemetry; with it on, a client command still
 * never loads the worker side of the SDK.
 */

describe('OTEL_* settings', () => {
  const rows: Array<{ name: string; env: Record<string, string>; on: string | false; warning?: RegExp }> = [
    { name: 'nothing set: off', env: {}, on: false },
    { name: 'an empty endpoint: off', env: { OTEL_EXPORTER_OTLP_ENDPOINT: ' ' }, on: false },
    {
      name: 'the base endpoint gets /v1/traces',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' },
      on: 'http://collector:4318/v1/traces',
    },
    {
      name: 'the traces endpoint is taken as it is, and wins',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/otlp/traces' },
      on: 'https://b/otlp/traces',
    },
    {
      name: 'otlp asked for by name: the default endpoint',
      env: { OTEL_TRACES_EXPORTER: 'otlp' },
      on: 'http://localhost:4318/v1/traces',
    },
    { name: 'none: off', env: { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' }, on: false },
    {
      name: 'the SDK disabled: off',
      env: { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' },
      on: false,
    },
    {
      name: 'not a URL: off, naming the variable',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      on: false,
      warning:
        /^OTEL_EXPORTER_OTLP_ENDPOINT "collector:4318" is not an http:\/\/ or https:\/\/ URL, so tracing is off — fix: give the collector's OTLP\/HTTP address, e.g\. http:\/\/localhost:4318, or unset OTEL_EXPORTER_OTLP_ENDPOINT$/,
    },
    {
      name: 'a traces endpoint that is not a URL names that variable',
      env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://x/v1/traces' },
      on: false,
      warning:
        /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT "ftp:\/\/x\/v1\/traces" is not an http:\/\/ or https:\/\/ URL.* e\.g\. http:\/\/localhost:4318\/v1\/traces, or unset OTEL_EXPORTER_OTLP_TRACES_ENDPOINT$/,
    },
    {
      name: 'an exporter Datum does not ship: off',
      env: { OTEL_TRACES_EXPORTER: 'zipkin', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' },
      on: false,
      warning: /^OTEL_TRACES_EXPORTER "zipkin" names zipkin, which Datum does not ship; tracing is off — fix: /,
    },
    {
      name: 'otlp and another: otlp only',
      env: { OTEL_TRACES_EXPORTER: 'otlp,console', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' },
      on: 'http://a:4318/v1/traces',
      warning: /names console, which Datum does not ship; it exports over otlp only/,
    },
    {
      name: 'grpc asked for: JSON over HTTP is sent, and said so',
      env: { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4317' },
      on: 'http://a:4317/v1/traces',
      warning:
        /^OTEL_EXPORTER_OTLP_PROTOCOL "grpc": Datum sends OTLP over HTTP with JSON bodies \(http\/json\) to http:\/\/a:4317\/v1\/traces — fix: point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's OTLP\/HTTP port \(4318/,
    },
    {
      name: 'http/json asked for: no warning',
      env: { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' },
      on: 'http://a:4318/v1/traces',
    },
  ];

  for (const row of rows)
    it(row.name, () => {
      const config = tracingConfig(row.env);
      expect(config.on ? config.url : false).toBe(row.on);
      if (row.warning) {
        expect(config.warnings.length).toBe(1);
        expect(config.warnings[0]).toMatch(row.warning);
      } else expect(config.warnings).toEqual([]);
    });
});

describe('what a process loads', () => {
  const run = promisify(execFile);
  let tmp: string;
  let address: string[];
  beforeAll(async () => {
    tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-tracing-off-')));
    address = ['--address', `127.0.0.1:${await closedPort()}`];
  });
  afterAll(async () => {
    await fs.rm(tmp, { recursive: true, force: true });
  });

  /** The modules a `datum` run loaded (require.cache at exit), through a preload that records them. */
  async function loaded(args: string[], env: Record<string, string> = {}): Promise<string[]> {
    const out = path.join(tmp, `modules-${Math.random().toString(36).slice(2)}.txt`);
    const preload = path.join(tmp, 'record-modules.cjs');
    await fs.writeFile(
      preload,
      `process.on('exit', () => require('fs').writeFileSync(process.env.DATUM_MODULES_OUT, Object.keys(require.cache).join('\\n')));\n`,
    );
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env, DATUM_MODULES_OUT: out };
    for (const k of Object.keys(childEnv)) if (k.startsWith('OTEL_') && !(k in env)) delete childEnv[k];
    await run(process.execPath, ['-r', preload, DATUM, ...args], { env: childEnv, cwd: tmp }).catch(() => undefined);
    return (await fs.readFile(out, 'utf8')).split('\n');
  }
  const has = (mods: string[], pkg: string) =>
    mods.some((m) => m.includes(`${path.sep}node_modules${path.sep}${pkg}${path.sep}`));
  const OTEL = [path.join('@opentelemetry', 'sdk-trace-base'), path.join('@temporalio', 'interceptors-opentelemetry')];

  it('with tracing off, neither a client command nor the worker nor the agent loads OpenTelemetry', async () => {
    const agentYaml = path.join(tmp, 'agent.yaml');
    await fs.writeFile(agentYaml, `node: O-1\nroot: ${path.join(tmp, 'O-1')}\nreconciliation:\n  mode: observe\n`);
    for (const args of [
      ['status', ...address],
      ['worker', '--fleet', path.join(projectRoot(), 'examples/fleet'), '--data', tmp, ...address],
      ['agent', '--config', agentYaml, ...address],
    ]) {
      const mods = await loaded(args);
      expect(mods.length, args[0]).toBeGreaterThan(50);
      for (const pkg of [...OTEL, path.join('@opentelemetry', 'api')]) expect(has(mods, pkg), `${args[0]} ${pkg}`).toBe(false);
    }
  });

  it('with tracing on, the worker loads it, and a client command loads it without the worker side of the SDK', async () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${address[1].split(':')[1]}` };
    const client = await loaded(['status', ...address], on);
    for (const pkg of OTEL) expect(has(client, pkg), pkg).toBe(true);
    expect(has(client, path.join('@temporalio', 'worker'))).toBe(false);
    const worker = await loaded(['worker', '--fleet', path.join(projectRoot(), 'examples/fleet'), '--data', tmp, ...address], on);
    for (const pkg of OTEL) expect(has(worker, pkg), pkg).toBe(true);
  });
});
