import { Runtime } from '@temporalio/worker';
import { BUILD_INFO_METRIC } from '../contract';
import { datumVersion } from './command';

/**
 * datum_build_info{version="…"} 1 on a worker's or an agent's metrics endpoint: the version
 * `datum --version` prints, so a dashboard can tell which build each process runs. Only where
 * metrics are served (the runtime was installed with an exporter).
 */
export function publishBuildInfo(metricsUrl: string | null): void {
  if (!metricsUrl) return;
  Runtime.instance()
    .metricMeter.createGauge(BUILD_INFO_METRIC, 'int', '1', 'Always 1; the labels say which build of Datum this process runs')
    .set(1, { version: datumVersion(), node_version: process.version });
}
