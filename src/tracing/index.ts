/*
 * OpenTelemetry tracing for Datum's processes, off by default: with no OTLP endpoint in the
 * environment (src/tracing/config.ts) nothing of OpenTelemetry is loaded, no tracer exists and
 * no span is made. With one, the process loads src/tracing/sdk.ts and one trace runs from
 * `datum rollout start` through the rollout workflow, the prepareRolloutNodes activity and the
 * reconcileNode workflows it starts, to the node agents' observe, apply and probe activities
 * (the workflow side: src/workflows/interceptors/tracing.ts).
 *
 * This module imports types only: the `datum` client commands load it on every run.
 */
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import type { OpenTelemetrySinks } from '@temporalio/interceptors-opentelemetry/lib/workflow';
import { tracingConfig } from './config';
import type { Tracing, TracingLog, TracingOptions } from './types';

export type { Tracing, TracingLog, TracingOptions } from './types';

/** A pino logger as a TracingLog: the worker's and the agent's warnings are log lines. */
export function pinoLog(logger: { warn(fields: object, message: string): void; info(message: string): void }): TracingLog {
  return { warn: (message, fields) => logger.warn(fields ?? {}, message), info: (message) => logger.info(message) };
}

let active: Tracing | undefined;

/** Starts this process's tracing from the environment; undefined (and nothing loaded) when it is off. */
export async function startTracing(options: TracingOptions): Promise<Tracing | undefined> {
  if (active) return active;
  const config = tracingConfig(options.env);
  for (const warning of config.warnings) options.log.warn(warning);
  if (!config.on) return undefined;
  const { createTracing } = await import('./sdk.js');
  active = createTracing(config, options);
  return active;
}

/** The process's tracing, when startTracing turned it on. */
export function activeTracing(): Tracing | undefined {
  return active;
}

/** Flushes and stops the process's tracing, if on (at exit: the last spans are not lost). */
export async function stopTracing(): Promise<void> {
  const tracing = active;
  active = undefined;
  await tracing?.shutdown();
}

/**
 * A span sink that drops what it is given. Every worker registers the workflow interceptor's
 * sink, tracing on or off: a workflow started by a traced client makes spans on a worker that
 * does not export them, and the SDK logs an error for each call of a sink it does not know.
 */
const DROP: InjectedSinks<OpenTelemetrySinks>['exporter'] = { export: { fn: () => undefined, callDuringReplay: false } };

/** What tracing adds to a Worker's options: its activity interceptors and the workflow span sink. */
export function tracingWorkerOptions(tracing: Tracing | undefined = active): {
  activityInterceptors: ActivityInterceptorsFactory[];
  sinks: InjectedSinks<OpenTelemetrySinks>;
} {
  return {
    activityInterceptors: tracing?.activityInterceptors ?? [],
    sinks: { exporter: tracing?.workflowExporter ?? DROP },
  };
}
