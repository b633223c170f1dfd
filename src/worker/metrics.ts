import { isIP } from 'node:net';
import { Runtime } from '@temporalio/worker';
import type { Logger as Pino } from 'pino';
import {
  APPLY_DURATION_BUCKETS,
  APPLY_DURATION_METRIC,
  CONVERGENCE_LATENCY_BUCKETS,
  CONVERGENCE_LATENCY_METRIC,
  DETECTION_LATENCY_BUCKETS,
  DETECTION_LATENCY_METRIC,
  OBSERVATION_AGE_BUCKETS,
  OBSERVATION_AGE_METRIC,
  withFix,
} from '../contract';
import { SdkLogger, coreFilter, createLogger, resolveLogging, routeConsole } from './logging';

/*
 * Prometheus metrics of a worker process (`datum worker`, `datum agent`): one HTTP endpoint,
 * GET http://IP:PORT/metrics, served by the Temporal SDK core's exporter. It carries
 *
 *   - the SDK's own runtime metrics, named with core's prefix `temporal_` (polls, task latencies,
 *     slots, sticky cache, request counts …; durations in milliseconds, core's default);
 *   - Datum's, not prefixed, labelled namespace/task_queue/workflow_type or activity_type like
 *     core's: the workflow's decisions, conditions, observation age, detection and convergence
 *     latency and ledger backlog (through the sink of src/worker/workflow-metrics.ts), the fleet
 *     counts from visibility (fleet-metrics.ts), the agent's actions and apply durations
 *     (src/agent/metrics.ts) and datum_build_info. Names: src/contract/metrics.ts; the Metrics
 *     table of docs/observability.md lists every one with its labels.
 *
 * Off unless asked for: `--metrics-address IP:PORT` or DATUM_METRICS_ADDRESS=IP:PORT (the
 * flag wins; "off" or empty turns it off). Not on by default because a fixed port would collide
 * wherever several Datum processes share a host (several agents, the dev stack, tests). The
 * conventional addresses are 127.0.0.1:9464 for the controller worker and 127.0.0.1:9465 for an
 * agent (0.0.0.0:… to be scraped from elsewhere, e.g. inside a container).
 *
 * The SDK runtime is a per-process singleton configured once, before the first connection or
 * worker: installRuntime must run before connectWorker/NativeConnection.connect.
 */

export const METRICS_ADDRESS_ENV = 'DATUM_METRICS_ADDRESS';
export const METRICS_ADDRESS_FLAG = '--metrics-address';
/** Conventional addresses (not defaults): one controller and one agent on a host do not collide. */
export const SUGGESTED_METRICS_ADDRESS = { worker: '127.0.0.1:9464', agent: '127.0.0.1:9465' } as const;

/** Metrics cannot be served as configured; the message names the setting to change. */
export class MetricsConfigError extends Error {
  override readonly name = 'MetricsConfigError';
}

export interface InstalledRuntime {
  /** IP:PORT metrics are served on, or null when metrics are off. */
  metricsAddress: string | null;
  /** http://IP:PORT/metrics, or null. */
  metricsUrl: string | null;
  /** The process's structured logger (also the SDK's: src/worker/logging.ts). */
  logger: Pino;
}

let installed: InstalledRuntime | undefined;

/**
 * Installs the process's Temporal runtime, serving Prometheus metrics when an address is given
 * (`metricsAddress`, from the command's flag) or set in DATUM_METRICS_ADDRESS. With neither,
 * nothing is installed and the SDK's default runtime applies. Calling it again with the same
 * setting is a no-op; a different one, or a runtime already created without metrics, is an error.
 */
export interface RuntimeSettings {
  metricsAddress?: string;
  /** Which process logs (worker, agent, …); --log-level and --log-format, else their DATUM_LOG_* variables. */
  component?: string;
  logLevel?: string;
  logFormat?: string;
  /** The process is Datum's own (datum worker, datum agent): its console.warn/error go to the logger too. */
  ownConsole?: boolean;
}

export function installRuntime(options: RuntimeSettings = {}): InstalledRuntime {
  const fromFlag = options.metricsAddress !== undefined;
  const source = fromFlag ? METRICS_ADDRESS_FLAG : METRICS_ADDRESS_ENV;
  const raw = (fromFlag ? options.metricsAddress : process.env[METRICS_ADDRESS_ENV])?.trim() ?? '';
  const address = raw === '' || raw.toLowerCase() === 'off' ? null : checkAddress(raw, source);

  if (installed) {
    if (installed.metricsAddress === address) return installed;
    throw new MetricsConfigError(
      withFix(
        `metrics are already served on ${installed.metricsAddress} in this process, which configures its runtime once`,
        `give ${METRICS_ADDRESS_FLAG} or ${METRICS_ADDRESS_ENV} one value, before the worker starts`,
      ),
    );
  }
  const logging = { level: options.logLevel, format: options.logFormat, component: options.component ?? 'datum' };
  const { level } = resolveLogging(logging);
  const logger = createLogger(logging);
  if (options.ownConsole) routeConsole(logger);
  if (Runtime._instance !== undefined) {
    // An embedding program or a test configured the runtime: serve no metrics, log with our own logger only.
    if (address === null) return { metricsAddress: null, metricsUrl: null, logger };
    throw new MetricsConfigError(
      withFix(
        `cannot serve metrics on ${address} (from ${source}): this process's Temporal runtime was already created without them`,
        'install the runtime (installRuntime) before the first connection or worker',
      ),
    );
  }
  try {
    Runtime.install({
      // Every SDK line, the core's forwarded ones and the workflows' and activities' `log` go through pino.
      logger: new SdkLogger(logger),
      telemetryOptions: {
        logging: { filter: coreFilter(level), forward: {} },
        ...(address === null ? {} : metricsTelemetry(address)),
      },
    });
  } catch (err) {
    throw metricsError(err, address, source);
  }
  installed = { metricsAddress: address, metricsUrl: address === null ? null : `http://${address}/metrics`, logger };
  return installed;
}

function metricsTelemetry(address: string) {
  return {
    metrics: {
      prometheus: {
        bindAddress: address,
        histogramBucketOverrides: {
          [OBSERVATION_AGE_METRIC]: OBSERVATION_AGE_BUCKETS,
          [APPLY_DURATION_METRIC]: APPLY_DURATION_BUCKETS,
          [DETECTION_LATENCY_METRIC]: DETECTION_LATENCY_BUCKETS,
          [CONVERGENCE_LATENCY_METRIC]: CONVERGENCE_LATENCY_BUCKETS,
        },
      },
    },
  };
}

function metricsError(err: unknown, address: string | null, source: string): Error {
  const message = err instanceof Error ? err.message : String(err);
  const why = /address already in use|os error (98|48)\b|EADDRINUSE/i.test(message) ? 'the port is already in use' : message;
  return new MetricsConfigError(
    withFix(
      `cannot serve metrics on ${address ?? '(none)'} (from ${source}): ${why}`,
      `choose a free IP:PORT with ${METRICS_ADDRESS_FLAG} or ${METRICS_ADDRESS_ENV} (e.g. ${SUGGESTED_METRICS_ADDRESS.worker} for a worker, ${SUGGESTED_METRICS_ADDRESS.agent} for an agent), or set it to "off"`,
    ),
    { cause: err },
  );
}

/**
 * For connectWorker: installs from DATUM_METRICS_ADDRESS unless the runtime already exists
 * (a command installed it from its flag, or an embedding program or test configured its own).
 */
export function ensureRuntime(): void {
  if (installed || Runtime._instance !== undefined) return;
  installRuntime();
}

/**
 * IP:PORT, as core's exporter binds a socket address, not a host name ("localhost" is taken as
 * 127.0.0.1), with a port a scraper can be told (so not 0).
 */
function checkAddress(raw: string, source: string): string {
  const m = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(raw);
  const host = m ? (m[1] ?? m[2]) : '';
  const port = m ? Number(m[3]) : NaN;
  const ip = host === 'localhost' ? '127.0.0.1' : host;
  if (!m || isIP(ip) === 0 || (m[1] !== undefined && isIP(ip) !== 6) || port < 1 || port > 65535) {
    throw new MetricsConfigError(
      withFix(
        `${source} ${JSON.stringify(raw)} is not IP:PORT`,
        `e.g. ${SUGGESTED_METRICS_ADDRESS.worker} (0.0.0.0:PORT to be scraped from other hosts, [::1]:PORT for IPv6), or "off"`,
      ),
    );
  }
  return isIP(ip) === 6 ? `[${ip}]:${port}` : `${ip}:${port}`;
}
