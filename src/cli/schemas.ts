import { z } from 'zod';
import { agentConfig, desiredStateFile, resourceKey, resourceSpec } from '../schemas';

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

const SCHEMAS = {
  'desired-state.schema.json': {
    schema: desiredStateDocument,
    title: 'Datum desired state',
    description: 'desired/nodes/<node>.yaml: the generation and resources Datum keeps a node at (README.md, "Desired state").',
  },
  'agent.schema.json': {
    schema: agentConfig,
    title: 'Datum agent.yaml',
    description: 'The node agent\'s local configuration: its node, root, mode and operator overrides (README.md, "agent.yaml").',
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
    out[file] = JSON.stringify({ ...json, $id: `https://datum.invalid/schemas/${file}`, title, description }, null, 2);
  }
  return out;
}
