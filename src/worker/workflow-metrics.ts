import { Runtime, type InjectedSinks } from '@temporalio/worker';
import type { MetricMeter } from '@temporalio/common';
import type { WorkflowInfo } from '@temporalio/workflow';
import { METRICS_SINK, type DatumMetricSinks, type MetricSample } from '../contract';

/*
 * The worker end of Datum's workflow metrics (src/workflows/metrics.ts): each sample a workflow
 * hands to METRICS_SINK is recorded on the runtime's meter, labelled like core's own workflow
 * metrics (namespace, task_queue, workflow_type) from the calling workflow's info. The runtime's
 * meter, not the worker's: the worker wraps it with camelCase tags (namespace, taskQueue) for
 * every custom metric, and a Prometheus query joining Datum's series with `temporal_*` ones
 * needs one spelling. Where no exporter is configured the runtime's meter is a no-op.
 */

type Instrument = { record(value: number, labels: Record<string, string>): void };

/** The sinks a worker running Datum's workflows registers (Worker.create's `sinks`). */
export function workflowMetricSinks(meter: MetricMeter = Runtime.instance().metricMeter): InjectedSinks<DatumMetricSinks> {
  // Creating an instrument crosses into core; each name is created once per worker.
  const instruments = new Map<string, Instrument>();
  const instrument = (s: MetricSample): Instrument => {
    const key = `${s.kind}:${s.valueType}:${s.name}`;
    let found = instruments.get(key);
    if (!found) {
      found = create(meter, s);
      instruments.set(key, found);
    }
    return found;
  };
  return {
    [METRICS_SINK]: {
      emit: {
        fn(info: WorkflowInfo, sample: MetricSample) {
          instrument(sample).record(sample.value, {
            ...sample.labels,
            namespace: info.namespace,
            task_queue: info.taskQueue,
            workflow_type: info.workflowType,
          });
        },
        // Replay re-runs passes already counted (the workflow side sends nothing then either).
        callDuringReplay: false,
      },
    },
  };
}

function create(meter: MetricMeter, s: MetricSample): Instrument {
  switch (s.kind) {
    case 'counter': {
      const counter = meter.createCounter(s.name, s.unit, s.help);
      return { record: (v, labels) => counter.add(v, labels) };
    }
    case 'gauge': {
      const gauge = meter.createGauge(s.name, s.valueType, s.unit, s.help);
      return { record: (v, labels) => gauge.set(v, labels) };
    }
    case 'histogram': {
      const histogram = meter.createHistogram(s.name, s.valueType, s.unit, s.help);
      return { record: (v, labels) => histogram.record(v, labels) };
    }
  }
}
