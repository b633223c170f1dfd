/*
 * The OpenTelemetry SDK of a process with tracing on (loaded only then, by src/tracing/index.ts):
 * a tracer provider exporting over OTLP/HTTP with JSON bodies, the process's context manager and
 * W3C propagator, and the Temporal interceptors of @temporalio/interceptors-opentelemetry, each
 * narrowed to the work a traced caller started (see `traced` below).
 */
import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { Resource, envDetectorSync } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Next, WorkflowClientInterceptor } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client';
import { TRACE_HEADER } from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  makeWorkflowExporter,
} from '@temporalio/interceptors-opentelemetry/lib/worker';
import type { ActivityExecuteInput, ActivityInboundCallsInterceptor } from '@temporalio/worker';
import type { WorkflowInfo } from '@temporalio/workflow';
import { withFix } from '../contract/fix';
import type { TracingConfig } from './config';
import type { Tracing, TracingLog, TracingOptions } from './types';

/** On shutdown, spans still buffered get this long to reach the collector: within every stop budget (src/worker/shutdown.ts). */
const FLUSH_MS = 3000;

export function createTracing(config: Extract<TracingConfig, { on: true }>, options: TracingOptions): Tracing {
  const resource = Resource.default()
    .merge(new Resource({ 'service.name': `datum-${options.component}`, 'service.version': options.version }))
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over Datum's defaults.
    .merge(envDetectorSync.detect());
  const exporter = new WarnOnceExporter(new OTLPTraceExporter({ url: config.url }), config, options.log);
  const processor = new BatchSpanProcessor(exporter);
  // Sampler (OTEL_TRACES_SAMPLER / _ARG) and span limits come from the environment.
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  // The context manager carries the active span across awaits: an activity's span is the parent
  // of the workflows it starts through the process's client (prepareRolloutNodes).
  provider.register({ contextManager: new AsyncLocalStorageContextManager().enable() });
  const tracer = provider.getTracer('datum', options.version);
  const interceptorOptions = { tracer };
  const workflowExporter = makeWorkflowExporter(processor, resource);

  return {
    url: config.url,
    clientInterceptors: { workflow: [new TracedCallsOnly(new OpenTelemetryWorkflowClientInterceptor(interceptorOptions))] },
    activityInterceptors: [
      (ctx) => ({
        inbound: new TracedActivityInbound(ctx, interceptorOptions),
        // Puts trace_id and span_id on the activity's log lines.
        outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
      }),
    ],
    workflowExporter: {
      export: {
        // The SDK's sink puts every field of the workflow's info on its spans, memo and search
        // attributes included; a collector needs only which run the span belongs to.
        fn: (info, spans) => workflowExporter.export.fn(runOf(info), spans),
        callDuringReplay: false,
      },
    },
    inRootSpan: (name, fn) => inSpan(tracer, name, { root: true, kind: otel.SpanKind.CLIENT }, fn),
    inSpan: (name, fn) => inSpan(tracer, name, { kind: otel.SpanKind.INTERNAL }, () => fn()),
    shutdown: async () => {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        provider.shutdown().catch(() => undefined),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, FLUSH_MS))),
      ]);
      clearTimeout(timer);
    },
  };
}

/** `fn` in an active span that records its failure and ends with it. */
function inSpan<T>(
  tracer: otel.Tracer,
  name: string,
  options: otel.SpanOptions,
  fn: (span: otel.Span) => Promise<T>,
): Promise<T> {
  return tracer.startActiveSpan(name, options, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: otel.SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    } finally {
      span.end();
    }
  });
}

function runOf(info: WorkflowInfo): WorkflowInfo {
  const { workflowId, runId, workflowType, taskQueue, namespace } = info;
  // Only these reach makeWorkflowExporter, which copies them onto the span as attributes.
  return { workflowId, runId, workflowType, taskQueue, namespace } as WorkflowInfo;
}

/** A span is active in this context: the caller is part of a trace. */
function traced(): boolean {
  const span = otel.trace.getSpan(otel.context.active());
  return span !== undefined && otel.isSpanContextValid(span.spanContext());
}

/**
 * The SDK's client interceptor, for the calls that start work (start, signal, update, cancel,
 * terminate), and only inside a trace: the CLI's command span, or a traced activity (a rollout
 * starting reconcileNode). A call with no trace around it (the worker's visibility counts, a
 * rollout's progress polls) starts no trace of its own. Queries and describes are never traced:
 * `rollout start --wait` polls, and each poll would be a span.
 */
class TracedCallsOnly implements WorkflowClientInterceptor {
  constructor(private readonly inner: OpenTelemetryWorkflowClientInterceptor) {}

  startWithDetails: WorkflowClientInterceptor['startWithDetails'] = (input, next) =>
    traced() ? this.inner.startWithDetails(input, next) : next(input);
  signal: WorkflowClientInterceptor['signal'] = (input, next) => (traced() ? this.inner.signal(input, next) : next(input));
  signalWithStart: WorkflowClientInterceptor['signalWithStart'] = (input, next) =>
    traced() ? this.inner.signalWithStart(input, next) : next(input);
  startUpdate: WorkflowClientInterceptor['startUpdate'] = (input, next) =>
    traced() ? this.inner.startUpdate(input, next) : next(input);
  startUpdateWithStart: WorkflowClientInterceptor['startUpdateWithStart'] = (input, next) =>
    traced() ? this.inner.startUpdateWithStart(input, next) : next(input);
  cancel: WorkflowClientInterceptor['cancel'] = (input, next) => (traced() ? this.inner.cancel(input, next) : next(input));
  terminate: WorkflowClientInterceptor['terminate'] = (input, next) =>
    traced() ? this.inner.terminate(input, next) : next(input);
}

/**
 * RunActivity spans for activities a traced workflow scheduled (their headers carry its
 * context). The SDK's interceptor would start a new trace for every other one: each resync's
 * observe, each watch, on every node.
 */
class TracedActivityInbound extends OpenTelemetryActivityInboundInterceptor {
  override async execute(input: ActivityExecuteInput, next: Next<ActivityInboundCallsInterceptor, 'execute'>) {
    return TRACE_HEADER in input.headers ? super.execute(input, next) : next(input);
  }
}

/**
 * The OTLP exporter, with its failures told to the operator: a warning when spans first cannot
 * be sent (naming the endpoint, the error and the fix), one line again when they can. Spans
 * are dropped meanwhile; nothing else depends on them.
 */
class WarnOnceExporter implements SpanExporter {
  private failing = false;

  constructor(
    private readonly inner: SpanExporter,
    private readonly config: Extract<TracingConfig, { on: true }>,
    private readonly log: TracingLog,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        if (this.failing) this.log.info?.(`exporting traces to ${this.config.url} again`);
        this.failing = false;
      } else if (!this.failing) {
        this.failing = true;
        this.log.warn(this.failure(result.error), { otlp_endpoint: this.config.url });
      }
      done(result);
    });
  }

  private failure(error: Error | undefined): string {
    const fix =
      this.config.source === 'the OTLP default'
        ? 'start a collector there, or set OTEL_EXPORTER_OTLP_ENDPOINT to yours (OTEL_TRACES_EXPORTER=none turns tracing off)'
        : `start the collector there, or correct ${this.config.source} (unset it to turn tracing off)`;
    return withFix(
      `cannot export traces to ${this.config.url} (from ${this.config.source}): ${error?.message ?? 'the export failed'}; spans are dropped until it answers, and nothing else stops`,
      fix,
    );
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
