import { randomUUID } from 'node:crypto';
import { stringify } from 'yaml';
import { DesiredStateAuthority } from '../../activities/authority';
import {
  CONTROL_TASK_QUEUE,
  WORKFLOW_TYPES,
  importWorkflowId,
  type ImportNodeResult,
  type ImportNodeWorkflow,
  type InventoryRequest,
  isResourceKey,
} from '../../contract';
import { RESOURCE_TYPES, targetOf, type BoundIntent, type ResourceSpec, type ResourceType } from '../../domain';
import { parseDesiredStateText } from '../../schemas/documents';
import { UsageError, durationFlag, outputFormat, wholeFlag, type OutputFlags, type OutputFormat } from '../args';
import type { CommandModule } from '../command';
import { withTemporal, type ConnectionFlags } from '../connection';
import { withFix } from '../errors';
import { fleetDirFrom } from '../dirs';
import { checkNode } from '../nodes';
import { print, printDocument } from '../output';

/*
 * `datum import NODE [KEY=TYPE:NAME …]`: desired state for a host as it is, as `puppet resource`
 * or `terraform import` give it. The node's own agent reads each resource (the `inventory`
 * activity, run by the importNode workflow: an observe that writes nothing) and this prints the
 * desired-state YAML that declares exactly that, checked with the parser the controller uses, so
 * `datum validate` accepts it and a first observe pass from it finds no drift.
 */

interface ImportRaw extends ConnectionFlags, OutputFlags {
  node: string;
  resources: string[];
  generation?: string;
  fleet?: string;
  flags?: boolean;
  timeout?: string;
}

export interface ImportInput {
  values: ImportRaw;
  node: string;
  request: Omit<InventoryRequest, 'node'>;
  /** Null: 1, or with --fleet the node's generation there plus one. */
  generation: number | null;
  format: OutputFormat;
  nodeTimeout: string;
}

/** KEY=TYPE:NAME, as a target is spelled (web=unit:nginx.service, data=directory:srv/data). */
function parseResource(arg: string): [string, { type: ResourceType; name: string }] {
  const m = /^([^=]+)=([a-z]+):(.+)$/.exec(arg);
  const example = 'such as web=unit:nginx.service, pkg=package:nginx or conf=file:etc/app.conf';
  if (!m) throw new UsageError(withFix(`${JSON.stringify(arg)} is not KEY=TYPE:NAME`, `write each resource ${example}`));
  const [, key, type, name] = m;
  if (!isResourceKey(key))
    throw new UsageError(withFix(`"${key}" is not a resource key`, 'start a key with a letter; use letters, digits, "_" or "-"'));
  if (!(RESOURCE_TYPES as readonly string[]).includes(type))
    throw new UsageError(
      withFix(`"${type}" in ${JSON.stringify(arg)} is not a resource type`, `use one of ${RESOURCE_TYPES.join(', ')}`),
    );
  return [key, { type: type as ResourceType, name }];
}

/** The node's desired state now, and its resources as it names them: each key with its target's type and name. */
async function fromDesired(
  fleet: string,
  node: string,
): Promise<{ intent: BoundIntent; resources: InventoryRequest['resources'] }> {
  const read = await new DesiredStateAuthority(fleet).read(node);
  if (!read.ok) throw new Error(read.error);
  const resources: InventoryRequest['resources'] = {};
  for (const [key, spec] of Object.entries(read.intent.resources)) {
    const target = targetOf(key, spec);
    resources[key] = { type: spec.type, name: target.slice(target.indexOf(':') + 1) };
  }
  return { intent: read.intent, resources };
}

/**
 * What the node cannot say but desired state does, kept where the node still matches it: a
 * package's .deb (artifact and sha256) when the version installed is the one desired state names.
 */
function withAuthored(spec: ResourceSpec, authored: ResourceSpec | undefined): ResourceSpec {
  if (spec.type === 'package' && authored?.type === 'package' && authored.version === spec.version && authored.artifact)
    return { ...spec, artifact: authored.artifact, sha256: authored.sha256 };
  return spec;
}

export const importCommand: CommandModule<ImportRaw, ImportInput> = {
  input(values) {
    const resources = Object.fromEntries(values.resources.map(parseResource));
    return {
      values,
      node: checkNode(values.node),
      request: { resources, include_flags: values.flags ?? true },
      generation: values.generation === undefined ? null : wholeFlag(values.generation, '--generation', '12'),
      format: outputFormat(values),
      nodeTimeout: `${Math.round((values.timeout === undefined ? 30_000 : durationFlag(values.timeout, '--timeout')) / 1000)}s`,
    };
  },
  async run({ values, node, request, generation, format, nodeTimeout }) {
    const fleet = values.fleet === undefined ? null : fleetDirFrom(values.fleet);
    const current = fleet ? await fromDesired(fleet, node) : null;
    const resources = { ...current?.resources, ...request.resources };
    const result = await withTemporal(values, (client) =>
      client.workflow.execute<ImportNodeWorkflow>(WORKFLOW_TYPES.importNode, {
        taskQueue: CONTROL_TASK_QUEUE,
        workflowId: importWorkflowId(node, randomUUID()),
        args: [{ node, resources, include_flags: request.include_flags, node_timeout: nodeTimeout }],
      }),
    ).catch((err: unknown) => {
      throw new Error(
        withFix(`the agent of ${node} did not answer the import: ${reasonOf(err)}`, `check that \`datum agent\` serves ${node}`),
      );
    });
    const { document, problems } = declared(
      result,
      generation ?? (current ? current.intent.generation + 1 : 1),
      current?.intent ?? null,
    );
    if (format !== 'text') printDocument(format, { node, read_at: result.read_at, desired: document, problems });
    else print(yamlOf(node, result, document, problems));
    return problems.length > 0 ? 1 : 0;
  },
};

/** The failure's innermost cause, which names what went wrong (a timeout, the agent's refusal). */
function reasonOf(err: unknown): string {
  let e = err as { message?: string; cause?: unknown } | undefined;
  while (e?.cause) e = e.cause;
  return e?.message ?? String(err);
}

interface Problem {
  resource_key: string;
  problem: string;
}

/** The desired-state document the answer declares (checked by the controller's own parser), and what could not be declared. */
function declared(
  result: ImportNodeResult,
  generation: number,
  current: BoundIntent | null,
): { document: Record<string, unknown>; problems: Problem[] } {
  const resources: Record<string, ResourceSpec> = {};
  const problems: Problem[] = [];
  for (const key of Object.keys(result.answer).sort()) {
    const found = result.answer[key];
    if ('spec' in found) resources[key] = withAuthored(found.spec, current?.resources[key]);
    else problems.push({ resource_key: key, problem: found.problem });
  }
  // The node's policy stays as its desired state set it (with defaults spelled out).
  const document = { node: result.node, generation, resources, ...(current ? { policy: current.policy } : {}) };
  // What validates here is what `datum validate` and the controller accept: a document that does not is Datum's bug.
  parseDesiredStateText(JSON.stringify(document), `datum import ${result.node}`, {
    revision: 'import',
    author: null,
    loaded_at: result.read_at,
  });
  return { document, problems };
}

function yamlOf(node: string, result: ImportNodeResult, document: Record<string, unknown>, problems: Problem[]): string {
  const head = [
    `# desired/nodes/${node}.yaml as node ${node} is, read by its agent at ${result.read_at} (datum import).`,
    '# Review it and commit it to the authority: a first pass from it finds no drift, and every later drift is real.',
    ...problems.map((p) => `# not imported: ${p.resource_key}: ${p.problem.replace(/\n/g, ' ')}`),
  ];
  return `${head.join('\n')}\n${stringify(document, { lineWidth: 0 })}`.trimEnd();
}
