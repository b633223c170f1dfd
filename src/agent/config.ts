import path from 'node:path';
import { InvalidAgentConfig, effectiveMode as domainEffectiveMode, type Mode } from '../domain';
import { MAX_AGENT_CONFIG_BYTES, parseAgentConfigText, tooLarge } from '../schemas/documents';
import type { AgentConfig } from '../schemas';
import { contentStamp, readdirOrEmpty, FileTooLarge, NotRegularFile, readRegular, rootProblems } from './fs';

/** Per agent.yaml (as given): its content as last parsed, and the file's stamp then. */
const parsed = new Map<string, { stamp: string; config: AgentConfig }>();
let parses = 0;

/** How many times this process read and parsed an agent.yaml (the rest were its settled stamp unchanged). */
export function agentConfigParses(): number {
  return parses;
}

/**
 * Reads and validates agent.yaml. Called on every observation and every apply, so an operator's
 * new mode or override takes effect without restarting the agent. Throws InvalidAgentConfig
 * (naming the file, the field and the fix) for a file that is unreadable or invalid, or whose
 * root overlaps another's, holds an agent.yaml or is a system directory (src/agent/fs/roots.ts).
 * The file is read and parsed again only when its stamp (inode, size, times) changed since, or
 * had not settled then; where its root is, is looked at every time.
 */
export async function loadAgentConfig(configPath: string): Promise<AgentConfig> {
  const stamp = await contentStamp(configPath);
  const known = parsed.get(configPath);
  const config = known && known.stamp === stamp?.stamp ? known.config : await parseAgentConfig(configPath);
  if (config !== known?.config) {
    if (stamp?.settled) parsed.set(configPath, { stamp: stamp.stamp, config });
    else parsed.delete(configPath);
  }
  // Where the root really is, against every other root this agent or its siblings serve.
  const problems = await rootProblems(configPath, config.root);
  if (problems.length > 0) throw new InvalidAgentConfig(configPath, problems);
  return config;
}

async function parseAgentConfig(configPath: string): Promise<AgentConfig> {
  parses++;
  let text: string;
  try {
    // Opened without blocking and judged by the descriptor, not by a stat before the read (a FIFO
    // swapped in between would block the agent); the size is capped while reading.
    text = (await readRegular(configPath, MAX_AGENT_CONFIG_BYTES, configPath, true)).bytes.toString('utf8');
  } catch (err) {
    if (err instanceof NotRegularFile)
      throw new InvalidAgentConfig(configPath, [
        {
          field: '(file)',
          problem: `is a ${err.kind}, not a regular file`,
          fix: 'point the agent at the agent.yaml file with --config',
        },
      ]);
    if (err instanceof FileTooLarge) throw new InvalidAgentConfig(configPath, tooLarge('agent', err.size));
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new InvalidAgentConfig(configPath, [
      {
        field: '(file)',
        problem: `cannot be read (${code}: ${(err as Error).message})`,
        fix:
          code === 'ENOENT'
            ? 'create agent.yaml at this path, or point the agent at the right file with --config'
            : 'make the file readable by the agent',
      },
    ]);
  }
  return parseAgentConfigText(text, configPath);
}

/** One agent.yaml of a fleet directory: FLEET/agents/<node>.yaml. */
export interface FleetAgentFile {
  /** The file's name without .yaml: the node it configures. */
  node: string;
  file: string;
}

/**
 * The agent.yaml files of a fleet directory, sorted by node; none when there is no agents/.
 * Only lists them: each agent validates its own file (loadAgentConfig) when it reads it.
 */
export async function listFleetAgents(fleetDir: string): Promise<FleetAgentFile[]> {
  const dir = path.join(fleetDir, 'agents');
  const names = await readdirOrEmpty(dir);
  return names
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => ({ node: f.replace(/\.yaml$/, ''), file: path.join(dir, f) }));
}

/**
 * The effective mode of one resource, by the domain's one rule (observe when the host or the
 * resource says so), with the agent.yaml setting that made it observe, for the refusal's words.
 */
export function effectiveMode(config: AgentConfig, resourceKey: string): { mode: Mode; because: string | null } {
  const { mode: host, resources } = config.reconciliation;
  const mode = domainEffectiveMode({ mode: host, resource_modes: resources }, resourceKey);
  if (mode === 'enforce') return { mode, because: null };
  return {
    mode,
    because:
      host === 'observe'
        ? 'the host is in observe mode (reconciliation.mode: observe)'
        : `the resource is set to observe (reconciliation.resources.${resourceKey}: observe)`,
  };
}
