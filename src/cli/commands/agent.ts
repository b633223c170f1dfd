import { agentTaskQueue } from '../../contract';
import { DEFAULT_AGENT_CONFIG } from '../dirs';
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
    // No --config: the one agent.yaml of a node, where seed 001 puts it. A missing file is then
    // named (loadAgentConfig: "cannot be read (ENOENT …) — fix: create agent.yaml at this path …").
    const configPaths = values.config.length > 0 ? values.config : [DEFAULT_AGENT_CONFIG];
    return { values, configPaths };
  },
  async run({ values, configPaths }) {
    const [{ runAgents }, { installRuntime }] = await Promise.all([
      import('../../agent/index.js'),
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
