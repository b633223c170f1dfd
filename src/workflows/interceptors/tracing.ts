/*
 * Tracing inside the workflow sandbox, on @temporalio/interceptors-opentelemetry's interceptors.
 * The sandbox cannot read the environment, so a run follows its caller: it is traced when the
 * command or activity that started it was (its start carries the trace context in the
 * `_tracer-data` header), and is a pass-through otherwise. With tracing off everywhere no header
 * exists, and this module makes no span, adds no header and calls no sink.
 *
 * A traced run is traced up to its first durable wait (its first timer, or the first watch a loop
 * leaves running, which is its wait under patch watch-ends-at-resync), not to its end:
 * reconcileNode loops until it is superseded, and a trace that took in every resync for weeks
 * would bury the rollout that started it (and its run span would reach the collector only when
 * the run ended). So the trace of a rollout holds its preparation of every node and its first
 * progress check, and in each reconcileNode it started, the first pass: observe, apply, probe,
 * the ledger append, and the watch the pass leaves running. RunWorkflow:<type> spans that part
 * of the run. Later passes, and runs continued as new after it, are not traced.
 *
 * Deterministic: whether a run is traced is read from its start event, and the cut is made at
 * the same command on every replay. Tracing adds headers to commands, never commands.
 */
import * as otel from '@opentelemetry/api';
import { TRACE_HEADER, extractContextFromHeaders } from '@temporalio/interceptors-opentelemetry/lib/instrumentation';
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
  SPAN_DELIMITER,
  SpanName,
} from '@temporalio/interceptors-opentelemetry/lib/workflow';
import {
  ContinueAsNew,
  workflowInfo,
  type WorkflowInboundCallsInterceptor,
  type WorkflowInterceptors,
  type WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';

/** The SDK's inbound interceptor, with its tracer (the sandbox's provider, exporting through the sink). */
class Inbound extends OpenTelemetryInboundInterceptor {
  get spanTracer(): otel.Tracer {
    return this.tracer;
  }
}

/** One run's tracing: undecided until it starts, then traced up to its first wait, or not at all. */
interface RunTrace {
  phase: 'untraced' | 'traced' | 'done';
  span?: otel.Span;
  sdk?: { inbound: Inbound; outbound: OpenTelemetryOutboundInterceptor };
}

/** The SDK's interceptors, made on first use: constructing them sets up the sandbox's tracer. */
function sdk(run: RunTrace): NonNullable<RunTrace['sdk']> {
  run.sdk ??= { inbound: new Inbound(), outbound: new OpenTelemetryOutboundInterceptor() };
  return run.sdk;
}

function endRun(run: RunTrace, error?: unknown): void {
  if (run.phase !== 'traced' || !run.span) return;
  run.phase = 'done';
  if (error === undefined || error instanceof ContinueAsNew) run.span.setStatus({ code: otel.SpanStatusCode.OK });
  else {
    run.span.recordException(error as Error);
    run.span.setStatus({ code: otel.SpanStatusCode.ERROR, message: String((error as Error)?.message ?? error) });
  }
  run.span.end();
}

/** The run waits: the rest of it is not traced. */
function endTraced(run: RunTrace): void {
  run.span?.addEvent('waits: the rest of this run is not traced');
  endRun(run);
}

const carries = (headers: Record<string, unknown>): boolean => TRACE_HEADER in headers;

export const interceptors = (): WorkflowInterceptors => {
  const run: RunTrace = { phase: 'untraced' };
  const traced = () => run.phase === 'traced';

  const inbound: WorkflowInboundCallsInterceptor = {
    async execute(input, next) {
      if (!carries(input.headers)) return next(input);
      const { inbound } = sdk(run);
      const parent = extractContextFromHeaders(input.headers)!;
      run.span = inbound.spanTracer.startSpan(
        `${SpanName.WORKFLOW_EXECUTE}${SPAN_DELIMITER}${workflowInfo().workflowType}`,
        {},
        parent,
      );
      run.phase = 'traced';
      try {
        const result = await otel.context.with(otel.trace.setSpan(parent, run.span), () => next(input));
        endRun(run);
        return result;
      } catch (error) {
        endRun(run, error);
        throw error;
      }
    },
    // A traced `datum` command's signal or update shows where it reached the run, traced or not.
    handleSignal: (input, next) => (carries(input.headers) ? sdk(run).inbound.handleSignal(input, next) : next(input)),
    handleUpdate: (input, next) => (carries(input.headers) ? sdk(run).inbound.handleUpdate(input, next) : next(input)),
    validateUpdate: (input, next) => (carries(input.headers) ? sdk(run).inbound.validateUpdate(input, next) : next(input)),
  };

  const outbound: WorkflowOutboundCallsInterceptor = {
    scheduleActivity: (input, next) => {
      if (!traced()) return next(input);
      const scheduled = sdk(run).outbound.scheduleActivity(input, next);
      // A loop's watch is where its pass ends and its wait begins: traced, then the cut.
      if (input.activityType === 'watch') endTraced(run);
      return scheduled;
    },
    scheduleLocalActivity: (input, next) => (traced() ? sdk(run).outbound.scheduleLocalActivity(input, next) : next(input)),
    startChildWorkflowExecution: (input, next) =>
      traced() ? sdk(run).outbound.startChildWorkflowExecution(input, next) : next(input),
    signalWorkflow: (input, next) => (traced() ? sdk(run).outbound.signalWorkflow(input, next) : next(input)),
    continueAsNew: (input, next) => (traced() ? sdk(run).outbound.continueAsNew(input, next) : next(input)),
    startNexusOperation: (input, next) => (traced() ? sdk(run).outbound.startNexusOperation(input, next) : next(input)),
    getLogAttributes: (input, next) => (traced() ? sdk(run).outbound.getLogAttributes(input, next) : next(input)),
    // The first wait ends the traced part of the run (see the top of this file).
    startTimer: (input, next) => {
      if (traced()) endTraced(run);
      return next(input);
    },
  };

  // Disposes the sandbox's context manager when the SDK's interceptors made one.
  return { inbound: [inbound], outbound: [outbound], internals: [new OpenTelemetryInternalsInterceptor()] };
};
