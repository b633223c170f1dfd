import { agentTaskQueue, withFix } from '../../contract';
import { UsageError } from '../args';
import { publishBuildInfo } from '../build-info';
import { applyConnectionFlags, type ConnectionFlags } from '../connection';
import { datumVersion, type CommandModule } from '../command';
import { pinoLog, startTracing, stopTracing } from '../../tracing';
import { untilSignal } from '../process';

export interface AgentRaw extends ConnectionFlags {
  config: string[];
  metricsAddress?: string;
  logLevel?: string;
  logFormat?: string;
}

export interface AgentInput {
  values: AgentRaw;
  configPaths: string[];
}

export const agentCommand: CommandModule<AgentRaw, AgentInput> = {
  input(values) {
    const configPaths = values.config;
    if (configPaths.length === 0)
      throw new UsageError(withFix('no agent.yaml given', 'pass --config PATH (once per node this process serves)'));
    return { values, configPaths };
  },
  async run({ values, configPaths }) {
    const [{ runAgents }, { installRuntime }] = await Promise.all([
      import('../../agent/worker.js'),
      import('../../worker/metrics.js'),
    ]);
    applyConnectionFlags(values);
    const metrics = installRuntime({
      metricsAddress: values.metricsAddress,
      component: 'agent',
      logLevel: values.logLevel,
      logFormat: values.logFormat,
      ownConsole: true,
    });
    publishBuildInfo(metrics.metricsUrl);
    // Before the workers are made: they take its interceptors (OTEL_*; off by default).
    await startTracing({ component: 'agent', version: datumVersion(), log: pinoLog(metrics.logger) });
    const agents = await runAgents({ configPaths, address: values.address, namespace: values.namespace });
    process.stdout.write(
      `datum agent: serving ${agents.nodes.map(agentTaskQueue).join(', ')}${metrics.metricsUrl ? `, metrics ${metrics.metricsUrl}` : ''}\n`,
    );
    await Promise.race([untilSignal(() => agents.shutdown()), agents.done]);
    await agents.done;
    await stopTracing();
    return 0;
  },
};
