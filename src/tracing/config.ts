/*
 * Whether this process traces, and where to, from the standard OpenTelemetry variables. Pure and
 * dependency-free: every `datum` command reads it, and only a process with tracing on loads the
 * OpenTelemetry SDK (src/tracing/sdk.ts).
 *
 * Off unless an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
 * OTEL_EXPORTER_OTLP_ENDPOINT) or OTEL_TRACES_EXPORTER names otlp explicitly (then the spec's
 * default, http://localhost:4318). OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it
 * off. A setting Datum cannot honour is a warning, never a refusal to start: tracing is for the
 * people watching the loop, and must not be why an agent stops reconciling.
 *
 * The rest of the standard variables are read by the SDK itself: OTEL_SERVICE_NAME and
 * OTEL_RESOURCE_ATTRIBUTES (the resource), OTEL_EXPORTER_OTLP_HEADERS / _TIMEOUT / _COMPRESSION
 * (and their _TRACES_ forms), OTEL_TRACES_SAMPLER / _ARG and OTEL_BSP_* (the batch processor).
 */
import { withFix } from '../contract/fix';

export type TracingConfig =
  | { on: false; warnings: string[] }
  /** `url` is where spans are POSTed; `source` the variable (or default) it came from, for messages. */
  | { on: true; url: string; source: string; warnings: string[] };

/** The OTLP/HTTP traces path the spec appends to OTEL_EXPORTER_OTLP_ENDPOINT (not to the _TRACES_ one). */
const TRACES_PATH = 'v1/traces';
/** The spec's default OTLP/HTTP endpoint, used only when OTEL_TRACES_EXPORTER asks for otlp by name. */
const DEFAULT_ENDPOINT = 'http://localhost:4318';
/** Datum sends OTLP/HTTP with JSON bodies (the collector's and Jaeger's 4318 port take it). */
const PROTOCOL = 'http/json';

type Env = Record<string, string | undefined>;

const value = (env: Env, name: string): string | undefined => {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? undefined : v;
};

export function tracingConfig(env: Env = process.env): TracingConfig {
  const warnings: string[] = [];
  const off = (): TracingConfig => ({ on: false, warnings });

  if (value(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return off();

  // 1. Which exporter: otlp (the only one Datum ships), none, or unset.
  const exporters = (value(env, 'OTEL_TRACES_EXPORTER') ?? '')
    .split(',')
    .map((e) => e.trim().toLowerCase())
    .filter(Boolean);
  if (exporters.includes('none')) return off();
  const others = exporters.filter((e) => e !== 'otlp');
  if (others.length > 0) {
    const stillOn = exporters.includes('otlp');
    warnings.push(
      withFix(
        `OTEL_TRACES_EXPORTER "${env.OTEL_TRACES_EXPORTER}" names ${others.join(', ')}, which Datum does not ship; ${stillOn ? 'it exports over otlp only' : 'tracing is off'}`,
        'set OTEL_TRACES_EXPORTER=otlp (or leave it unset) with an OTLP collector, or none',
      ),
    );
    if (!stillOn) return off();
  }

  // 2. Where: the traces endpoint as given, or the base endpoint with /v1/traces.
  const traces = value(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  let source: string;
  let url: string;
  if (traces !== undefined) [source, url] = ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', traces];
  else if (base !== undefined) [source, url] = ['OTEL_EXPORTER_OTLP_ENDPOINT', withTracesPath(base)];
  else if (exporters.includes('otlp')) [source, url] = ['the OTLP default', withTracesPath(DEFAULT_ENDPOINT)];
  else return off();

  if (!isHttpUrl(url)) {
    warnings.push(
      withFix(
        `${source} "${traces ?? base}" is not an http:// or https:// URL, so tracing is off`,
        `give the collector's OTLP/HTTP address, e.g. ${source === 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' ? `${DEFAULT_ENDPOINT}/${TRACES_PATH}` : DEFAULT_ENDPOINT}, or unset ${source}`,
      ),
    );
    return off();
  }

  // 3. How: JSON over HTTP. Another protocol asked for is named, and JSON is sent anyway.
  for (const name of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL']) {
    const protocol = value(env, name);
    if (protocol === undefined) continue;
    if (protocol !== PROTOCOL)
      warnings.push(
        withFix(
          `${name} "${protocol}": Datum sends OTLP over HTTP with JSON bodies (${PROTOCOL}) to ${url}`,
          `point ${source} at the collector's OTLP/HTTP port (4318, which takes JSON too), and set ${name}=${PROTOCOL} or unset it`,
        ),
      );
    break;
  }
  return { on: true, url, source, warnings };
}

function withTracesPath(base: string): string {
  return `${base.replace(/\/+$/, '')}/${TRACES_PATH}`;
}

function isHttpUrl(text: string): boolean {
  try {
    const u = new URL(text);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}
