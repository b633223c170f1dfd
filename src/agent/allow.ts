import { withFix } from '../contract';
import type { UnitProbe } from '../domain';
import type { AgentConfig, PackageSource } from '../schemas';
import { AgentRefusal } from './refusal';

/*
 * What the host allows outside the node's root (agent.yaml `allow`): which packages, from which
 * sources, and which units. Checked by the agent before anything runs (the `.deb` is not even
 * fetched for a package the host does not allow), whatever the workflow decided: desired state
 * reaches no further than the host's operator wrote.
 */

/** Whether `name` matches a pattern of agent.yaml, where * is any run of characters and ? one. */
export function matchesPattern(pattern: string, name: string): boolean {
  const regex = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${regex}$`).test(name);
}

/** Refuses a package the host's agent.yaml does not allow from `source`. */
export function assertPackageAllowed(config: AgentConfig | undefined, name: string, source: PackageSource): void {
  const entries = config?.allow.packages ?? [];
  const named = entries.filter((e) => matchesPattern(e.name, name));
  if (named.some((e) => e.from.includes(source))) return;
  const how = source === 'artifact' ? 'as a .deb artifact' : "from the host's apt sources";
  const problem =
    named.length === 0
      ? `package "${name}" is not in this host's allow.packages (${entries.length === 0 ? 'which allows none' : entries.map((e) => e.name).join(', ')}), and packages reach outside the node's root`
      : `package "${name}" is allowed on this host only from ${[...new Set(named.flatMap((e) => e.from))].join(' or ')}, not ${how}`;
  throw new AgentRefusal(
    'NotAllowedByHost',
    withFix(
      problem,
      `an operator on the node adds it to allow.packages in agent.yaml (with from: [${source}]) if the host should take it`,
    ),
    { package: name, source },
  );
}

/** Refuses a unit the host's agent.yaml does not allow. A template instance only matches a pattern with an @. */
export function assertUnitAllowed(config: AgentConfig | undefined, name: string): void {
  const patterns = config?.allow.units ?? [];
  const instance = name.includes('@');
  if (patterns.some((p) => matchesPattern(p, name) && (!instance || p.includes('@')))) return;
  throw new AgentRefusal(
    'NotAllowedByHost',
    withFix(
      `unit "${name}" is not in this host's allow.units (${patterns.length === 0 ? 'which allows none' : patterns.join(', ')})${instance ? '; a template instance needs a pattern with an @' : ''}, and a unit runs commands outside the node's root`,
      'an operator on the node adds it to allow.units in agent.yaml if the host should take it',
    ),
    { unit: name },
  );
}

/** The probe as agent.yaml's allow.probes spells it: the URL, or the argv. */
export const probeSpelling = (probe: UnitProbe): string => ('http' in probe ? probe.http.url : JSON.stringify(probe.command));

/** Whether the host's agent.yaml lists the probe: its URL, or its argv part by part, each a pattern. */
export function probeAllowed(config: AgentConfig | undefined, probe: UnitProbe): boolean {
  return (config?.allow.probes ?? []).some((entry) => {
    if ('http' in probe) return typeof entry === 'string' && matchesPattern(entry, probe.http.url);
    return (
      Array.isArray(entry) &&
      entry.length === probe.command.length &&
      entry.every((pattern, i) => matchesPattern(pattern, probe.command[i]))
    );
  });
}

/** Refuses a probe the host's agent.yaml does not list: it would run a command, or ask a URL, on desired state's word alone. */
export function assertProbeAllowed(config: AgentConfig | undefined, unit: string, probe: UnitProbe): void {
  if (probeAllowed(config, probe)) return;
  throw new AgentRefusal(
    'NotAllowedByHost',
    withFix(
      `the probe of unit "${unit}" (${probeSpelling(probe)}) is not in this host's allow.probes, and a probe runs on the host whatever the mode`,
      'an operator on the node adds it to allow.probes in agent.yaml if the host should run it',
    ),
    { unit, probe: probeSpelling(probe) },
  );
}
