import { runAgents } from '../../agent/worker';
import { agentTaskQueue, withFix } from '../../contract';
import { installRuntime, METRICS_OPTIONS } from '../../worker/metrics';
import { CONNECTION_OPTIONS, UsageError, parse } from '../args';
import type { Command } from '../main';
import { untilSignal } from '../process';

/** The parse layer: options and at least one agent.yaml, checked before anything starts (fuzzed in test/fuzz/cli.test.ts). */
export function agentArgs(argv: string[]) {
  const { values } = parse(argv, { config: { type: 'string', multiple: true }, ...CONNECTION_OPTIONS, ...METRICS_OPTIONS });
  const configPaths = values.config ?? [];
  if (configPaths.length === 0)
    throw new UsageError(withFix('no agent.yaml given', 'pass --config PATH (once per node this process serves)'));
  return { values, configPaths };
}

export const agentCommand: Command = {
  summary: 'run the node agent for one or more agent.yaml files',
  usage: `usage: datum agent --config agent.yaml [--config other.yaml …] [--address HOST:PORT] [--namespace NS] [--metrics-address IP:PORT]

Serves task queue datum-node-<node> for each agent.yaml: observes the node from the things
themselves and applies only what its local config allows (mode, overrides). agent.yaml is
re-read on every observation, so a new override or mode takes effect without a restart.
--metrics-address (or $DATUM_METRICS_ADDRESS) serves Prometheus metrics, e.g. 127.0.0.1:9465.`,
  async run(argv) {
    const { values, configPaths } = agentArgs(argv);
    const metrics = installRuntime({ metricsAddress: values['metrics-address'] });
    const agents = await runAgents({ configPaths, address: values.address, namespace: values.namespace });
    process.stdout.write(
      `datum agent: serving ${agents.nodes.map(agentTaskQueue).join(', ')}${metrics.metricsUrl ? `, metrics ${metrics.metricsUrl}` : ''}\n`,
    );
    await Promise.race([untilSignal(() => agents.shutdown()), agents.done]);
    await agents.done;
    return 0;
  },
};
