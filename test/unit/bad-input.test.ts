import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidAgentConfig, InvalidDesiredState, type InvalidInputError } from '../../src/domain';
import { parseAgentConfigText, parseDesiredStateText, readAgentConfigText } from '../../src/schemas/documents';

const DESIRED = 'fleet/desired/nodes/N-24.yaml';
const AGENT = 'fleet/agents/N-24.yaml';
const PROVENANCE = { revision: 'rev-1', author: null, loaded_at: '2026-11-29T12:00:00.000Z' };

const goodDesired = `node: N-24
generation: 12
resources:
  build: { type: release, version: "7.4", artifact: artifacts/app-7.4.tgz, sha256: "${'a'.repeat(64)}" }
  config: { type: file, path: etc/app/config.json, content: { workers: 8 } }
  app: { type: service, release: build, config: config, command: ["node", "server.js"] }
  maintenance: { type: flag, value: false }
`;
const goodAgent = `node: N-24
root: /var/lib/datum/N-24
reconciliation:
  mode: enforce
  resources: { config: observe }
overrides:
  maintenance: { approved_by: oncall, reason: "disk swap CHG-1234", since: 2026-11-28T10:00:00Z }
`;

function failure(fn: () => unknown): InvalidInputError {
  try {
    fn();
  } catch (e) {
    return e as InvalidInputError;
  }
  throw new Error('expected the input to be rejected');
}

interface Row {
  name: string;
  text: string;
  kind: 'desired' | 'agent';
  field: string;
  problem: RegExp;
  fix: RegExp;
}

const rows: Row[] = [
  {
    name: 'an unknown resource type',
    kind: 'desired',
    text: goodDesired.replace('type: flag, value: false', 'type: pkg, value: false'),
    field: 'resources.maintenance.type',
    problem: /unknown resource type "pkg"/,
    fix: /release, file, service, flag/,
  },
  {
    name: 'a missing generation',
    kind: 'desired',
    text: goodDesired.replace('generation: 12\n', ''),
    field: 'generation',
    problem: /generation is missing/,
    fix: /add generation/,
  },
  {
    name: 'a bad duration',
    kind: 'desired',
    text: `${goodDesired}policy:\n  observation_ttl: 60 seconds\n`,
    field: 'policy.observation_ttl',
    problem: /"60 seconds" is not a duration/,
    fix: /"60s"/,
  },
  {
    name: 'a negative retry budget',
    kind: 'desired',
    text: `${goodDesired}policy:\n  retry_budget: -1\n`,
    field: 'policy.retry_budget',
    problem: /cannot be negative/,
    fix: /positive count/,
  },
  {
    name: 'a repair_deadline that is not a duration',
    kind: 'desired',
    text: `${goodDesired}policy:\n  repair_deadline: ten minutes\n`,
    field: 'policy.repair_deadline',
    problem: /"ten minutes" is not a duration/,
    fix: /"5m"/,
  },
  {
    name: 'a zero repair_deadline',
    kind: 'desired',
    text: `${goodDesired}policy:\n  repair_deadline: 0s\n`,
    field: 'policy.repair_deadline',
    problem: /repair_deadline cannot be zero/,
    fix: /positive duration/,
  },
  {
    name: 'a repair_deadline given as a number',
    kind: 'desired',
    text: `${goodDesired}policy:\n  repair_deadline: 600\n`,
    field: 'policy.repair_deadline',
    problem: /repair_deadline must be a duration string/,
    fix: /"60s"/,
  },
  {
    name: 'a non-YAML desired-state file',
    kind: 'desired',
    text: 'node: N-24\n  generation: [12\n',
    field: '(line',
    problem: /not valid YAML/,
    fix: /YAML syntax/,
  },
  {
    name: 'a desired-state file that is not a mapping',
    kind: 'desired',
    text: 'just some words\n',
    field: '(file)',
    problem: /not a YAML mapping/,
    fix: /key: value/,
  },
  {
    name: 'an artifact without its digest',
    kind: 'desired',
    text: goodDesired.replace(`, sha256: "${'a'.repeat(64)}"`, ''),
    field: 'resources.build.sha256',
    problem: /artifact digest is missing/,
    fix: /sha256sum/,
  },
  {
    name: 'an absolute file path that leaves the node root',
    kind: 'desired',
    text: goodDesired.replace('path: etc/app/config.json', 'path: /etc/passwd'),
    field: 'resources.config.path',
    problem: /absolute and would leave the node root/,
    fix: /relative to the node root/,
  },
  {
    name: 'a file path with ".." that leaves the node root',
    kind: 'desired',
    text: goodDesired.replace('path: etc/app/config.json', 'path: etc/../../outside.json'),
    field: 'resources.config.path',
    problem: /"\.\." segment/,
    fix: /relative to the node root/,
  },
  {
    name: 'a service naming a release that does not exist',
    kind: 'desired',
    text: goodDesired.replace('release: build', 'release: bild'),
    field: 'resources.app.release',
    problem: /"bild" is not a release resource/,
    fix: /type: release/,
  },
  {
    name: 'a file for another node',
    kind: 'desired',
    text: goodDesired.replace('node: N-24', 'node: N-25'),
    field: 'node',
    problem: /names "N-25" but the file is for node "N-24"/,
    fix: /rename the file/,
  },
  {
    name: 'an override without provenance',
    kind: 'agent',
    text: goodAgent.replace(
      'maintenance: { approved_by: oncall, reason: "disk swap CHG-1234", since: 2026-11-28T10:00:00Z }',
      'maintenance: { reason: "disk swap" }',
    ),
    field: 'overrides.maintenance.approved_by',
    problem: /needs approved_by/,
    fix: /who approved the override/,
  },
  {
    name: 'an override with a since that is not a time',
    kind: 'agent',
    text: goodAgent.replace('since: 2026-11-28T10:00:00Z', 'since: yesterday'),
    field: 'overrides.maintenance.since',
    problem: /ISO 8601/,
    fix: /2026-11-28T10:00:00Z/,
  },
  {
    name: 'a per-resource mode that tries to enforce',
    kind: 'agent',
    text: goodAgent.replace('resources: { config: observe }', 'resources: { config: enforce }'),
    field: 'reconciliation.resources.config',
    problem: /can only be observe/,
    fix: /follow the host mode/,
  },
  {
    name: 'an unknown host mode',
    kind: 'agent',
    text: goodAgent.replace('mode: enforce', 'mode: repair'),
    field: 'reconciliation.mode',
    problem: /observe or enforce/,
    fix: /mode: observe/,
  },
  {
    name: 'a relative agent root',
    kind: 'agent',
    text: goodAgent.replace('root: /var/lib/datum/N-24', 'root: var/lib/datum'),
    field: 'root',
    problem: /absolute path/,
    fix: /absolute directory/,
  },
  // Seed 001 spells node: as host: (host: web-001 beside reconciliation.mode).
  {
    name: 'host: and node: naming different nodes',
    kind: 'agent',
    text: goodAgent.replace('node: N-24', 'node: N-24\nhost: web-001'),
    field: 'host',
    problem: /names "web-001" but node: names "N-24" \(host: is seed 001's spelling of node:/,
    fix: /keep one of them: node: .* or host:/,
  },
  {
    name: 'a host: that is no node name',
    kind: 'agent',
    text: goodAgent.replace('node: N-24', 'host: "web 001"'),
    field: 'host',
    problem: /not a valid node name/,
    fix: /letters, digits/,
  },
  {
    name: 'a host: that is a number',
    kind: 'agent',
    text: goodAgent.replace('node: N-24', 'host: 7'),
    field: 'host',
    problem: /must be a node name/,
    fix: /"N-24"/,
  },
  {
    name: "seed 001's agent.yaml as the seed prints it (host and mode, no root)",
    kind: 'agent',
    text: 'host: web-001\n\nreconciliation:\n  mode: observe\n',
    field: 'root',
    problem: /root is missing/,
    fix: /absolute directory this agent manages/,
  },
  {
    name: 'a non-YAML agent.yaml',
    kind: 'agent',
    text: '\u0000\u0001binary',
    field: '(file)',
    problem: /binary, not YAML/,
    fix: /YAML text file/,
  },
];

describe('bad input names the file, the field and the fix', () => {
  it.each(rows)('$name', (row) => {
    const error = failure(() =>
      row.kind === 'desired'
        ? parseDesiredStateText(row.text, DESIRED, PROVENANCE, 'N-24')
        : parseAgentConfigText(row.text, AGENT),
    );
    expect(error).toBeInstanceOf(row.kind === 'desired' ? InvalidDesiredState : InvalidAgentConfig);
    expect(error.name).toBe(row.kind === 'desired' ? 'InvalidDesiredState' : 'InvalidAgentConfig');
    expect(error.file).toBe(row.kind === 'desired' ? DESIRED : AGENT);
    const problem = error.problems.find((p) => p.field.startsWith(row.field));
    expect(problem, `problems were: ${JSON.stringify(error.problems)}`).toBeDefined();
    expect(problem!.problem).toMatch(row.problem);
    expect(problem!.fix).toMatch(row.fix);
    expect(error.message).toContain(row.kind === 'desired' ? DESIRED : AGENT);
    expect(error.message).toContain('nothing from this file was applied');
  });

  it('reports every problem of a file in one error, not just the first', () => {
    const text = goodDesired
      .replace('generation: 12\n', '')
      .replace('type: flag, value: false', 'type: pkg')
      .replace('path: etc/app/config.json', 'path: /etc/x');
    const error = failure(() => parseDesiredStateText(text, DESIRED, PROVENANCE, 'N-24'));
    expect(error.problems.map((p) => p.field).sort()).toEqual([
      'generation',
      'resources.config.path',
      'resources.maintenance.type',
    ]);
  });

  it('accepts a valid desired state and agent.yaml, filling in the policy defaults and mode observe', () => {
    const intent = parseDesiredStateText(goodDesired, DESIRED, PROVENANCE, 'N-24');
    expect(intent.generation).toBe(12);
    expect(intent.policy).toEqual({
      observation_ttl: '60s',
      retry_budget: 3,
      backoff: { initial: '5s', factor: 2, max: '300s' },
      resync_interval: '30s',
      node_timeout: '30s',
      conflict_window: '600s',
      watch: true,
    });
    expect(intent.policy, 'repair_deadline is never defaulted: desired state without it keeps its digest').not.toHaveProperty(
      'repair_deadline',
    );
    const withDeadline = parseDesiredStateText(`${goodDesired}policy:\n  repair_deadline: 15m\n`, DESIRED, PROVENANCE, 'N-24');
    expect(withDeadline.policy.repair_deadline).toBe('900s');
    expect(intent.provenance.source).toBe(DESIRED);
    const agent = parseAgentConfigText(goodAgent, AGENT);
    expect(agent.reconciliation).toEqual({ mode: 'enforce', resources: { config: 'observe' } });
    expect(parseAgentConfigText('node: N-1\nroot: /srv/n1\n', AGENT).reconciliation.mode).toBe('observe');
  });

  it("accepts seed 001's host: as the node's name, and both spellings when they name the same node", () => {
    const seed = readAgentConfigText('host: web-001\nroot: /var/lib/datum/web-001\nreconciliation:\n  mode: enforce\n', AGENT);
    expect(seed.nodeField).toBe('host');
    expect(seed.config).toMatchObject({ node: 'web-001', root: '/var/lib/datum/web-001', reconciliation: { mode: 'enforce' } });
    expect(readAgentConfigText(goodAgent, AGENT)).toMatchObject({ nodeField: 'node', config: { node: 'N-24' } });
    const both = readAgentConfigText(goodAgent.replace('node: N-24', 'node: N-24\nhost: N-24'), AGENT);
    expect(both).toMatchObject({ nodeField: 'both', config: { node: 'N-24' } });
    expect(both.config).not.toHaveProperty('host');
  });

  it('accepts the demo fleet of examples/fleet and the configuration examples of docs/configuration.md unchanged', () => {
    const ROOT = path.resolve(__dirname, '../..');
    const fleet = path.join(ROOT, 'examples/fleet');
    const yamlIn = (dir: string) => readdirSync(path.join(fleet, dir)).filter((f) => f.endsWith('.yaml'));
    const read = (dir: string, f: string) => readFileSync(path.join(fleet, dir, f), 'utf8');
    const desired = [...yamlIn('desired/nodes').map((f) => ['desired/nodes', f]), ...yamlIn('next').map((f) => ['next', f])];
    expect(desired.length).toBeGreaterThanOrEqual(6);
    for (const [dir, f] of desired)
      expect(parseDesiredStateText(read(dir, f), `${dir}/${f}`, PROVENANCE, path.basename(f, '.yaml')).node).toBe(
        path.basename(f, '.yaml'),
      );
    const agents = yamlIn('agents');
    expect(agents.length).toBeGreaterThanOrEqual(5);
    for (const f of agents) expect(parseAgentConfigText(read('agents', f), `agents/${f}`).node).toBe(path.basename(f, '.yaml'));

    // docs/configuration.md's reference blocks: the agent.yaml as written; the desired state once its one
    // placeholder (<hex>) is filled in, with the policy it calls "the defaults" equal to them.
    const reference = readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8');
    const blockAfter = (heading: string) => {
      const m = new RegExp(`${heading}[^\n]*\n+\`\`\`yaml\n([\\s\\S]*?)\`\`\``).exec(reference);
      if (!m) throw new Error(`docs/configuration.md has no yaml block after "${heading}"`);
      return m[1];
    };
    const agent = parseAgentConfigText(blockAfter('## Agent'), 'docs/configuration.md');
    expect(agent).toMatchObject({ node: 'N-24', reconciliation: { mode: 'observe', resources: { config: 'observe' } } });
    const documentedDesired = blockAfter('## Desired state').replace('"<hex>"', `"${'a'.repeat(64)}"`);
    const withPolicy = parseDesiredStateText(documentedDesired, DESIRED, PROVENANCE, 'N-24');
    const withoutPolicy = parseDesiredStateText(
      documentedDesired.replace(/\npolicy:[\s\S]*$/, '\n'),
      DESIRED,
      PROVENANCE,
      'N-24',
    );
    expect(Object.keys(withPolicy.resources)).toEqual(['build', 'config', 'app', 'maintenance']);
    expect(withPolicy.digest, 'the documented policy block is the defaults').toBe(withoutPolicy.digest);
  });
});
