import { z } from 'zod';
import { agentConfigFields, desiredStateFile, nodeId, resourceKey, resourceSpec } from '../schemas';

/*
 * JSON Schemas of the two files an operator writes, generated from the zod schemas the controller
 * and the agent validate with (`npm run schemas` writes them to schemas/; test/cli/generated.test.ts
 * fails when the committed ones are out of date). Editors validate as you type through the
 * yaml-language-server line at the top of each example file:
 *   # yaml-language-server: $schema=<path to>/schemas/desired-state.schema.json
 * What a schema cannot say (a path that leaves the node root, a service naming a missing release,
 * two resources on one target) `datum validate` checks with the real parsers.
 */

/** The desired-state file with its resources typed (the file schema takes them as unknown, to report each one). */
const desiredStateDocument = desiredStateFile.extend({ resources: z.record(resourceKey, resourceSpec) });

/**
 * agent.yaml as a person may write it: the node as `node:` or as seed 001's `host:` (the parser
 * reads host: as node:, src/domain/documents.ts), so one of the two is required, not node: itself.
 */
const agentDocument = agentConfigFields.extend({
  node: nodeId.optional(),
  host: nodeId.optional().describe("seed 001's spelling of node:; with both, they must name the same node"),
});
const ONE_NODE_FIELD = { anyOf: [{ required: ['node'] }, { required: ['host'] }] };

const SCHEMAS = {
  'desired-state.schema.json': {
    schema: desiredStateDocument,
    title: 'Datum desired state',
    description:
      'desired/nodes/<node>.yaml: the generation and resources Datum keeps a node at (docs/configuration.md, "Desired state").',
  },
  'agent.schema.json': {
    schema: agentDocument,
    title: 'Datum agent.yaml',
    description:
      'The node agent\'s local configuration: its node, root, mode and operator overrides (docs/configuration.md, "Agent").',
  },
} as const;

export type SchemaFile = keyof typeof SCHEMAS;

/** Each schema file's name and its JSON text (before formatting). */
export function jsonSchemas(): Record<SchemaFile, string> {
  const out = {} as Record<SchemaFile, string>;
  for (const [file, { schema, title, description }] of Object.entries(SCHEMAS) as Array<
    [SchemaFile, (typeof SCHEMAS)[SchemaFile]]
  >) {
    // The input side: what a person writes, before defaults are applied. Refinements (paths, durations) stay strings.
    const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', target: 'draft-7' });
    const extra = file === 'agent.schema.json' ? ONE_NODE_FIELD : {};
    out[file] = JSON.stringify({ ...json, ...extra, $id: `https://datum.invalid/schemas/${file}`, title, description }, null, 2);
  }
  return out;
}
