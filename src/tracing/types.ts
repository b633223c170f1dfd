/*
 * The shapes of a process's tracing, apart from src/tracing/index.ts so that the SDK side
 * (sdk.ts, which index.ts loads only when tracing is on) names them without importing its loader.
 */
import type { Span } from '@opentelemetry/api';
import type { ClientInterceptors } from '@temporalio/client';
import type { OpenTelemetrySinks } from '@temporalio/interceptors-opentelemetry/lib/workflow';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';

export interface TracingLog {
  warn(message: string, fields?: Record<string, unknown>): void;
  info?(message: string): void;
}

export interface TracingOptions {
  /** The default service.name is datum-<component> (OTEL_SERVICE_NAME wins). */
  component: 'cli' | 'worker' | 'agent';
  /** service.version: Datum's version. */
  version: string;
  /** Where configuration and export warnings go: the process's logger, or stderr for the CLI. */
  log: TracingLog;
  env?: Record<string, string | undefined>;
}

/** A process's tracing, once on. */
export interface Tracing {
  /** Where spans are sent. */
  readonly url: string;
  /** For every Temporal Client the process makes. */
  readonly clientInterceptors: ClientInterceptors;
  /** For every Worker the process runs. */
  readonly activityInterceptors: ActivityInterceptorsFactory[];
  /** The workflow interceptor's span sink, exporting with the process's resource. */
  readonly workflowExporter: InjectedSinks<OpenTelemetrySinks>['exporter'];
  /** Runs `fn` in a new trace whose root span is `name` (a CLI command). */
  inRootSpan<T>(name: string, fn: (span: Span) => Promise<T>): Promise<T>;
  /** Runs `fn` in a span `name` under the active one (within an activity: its RunActivity span). */
  inSpan<T>(name: string, fn: () => Promise<T>): Promise<T>;
  /** Sends the spans still buffered (bounded in time) and stops. */
  shutdown(): Promise<void>;
}
