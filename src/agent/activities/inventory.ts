import { withFix, type InventoryAnswer, type InventoryRequest } from '../../contract';
import { RESOURCE_TYPES } from '../../domain';
import { loadAgentConfig } from '../config';
import { realRoot } from '../fs';
import { providerFor, type NodeContext } from '../providers';
import { undeclaredFlags } from '../providers/flag';
import { assertNode } from './assert-node';

/*
 * inventory (`datum import NODE`): for each resource key asked, the spec that declares what the
 * node holds now under that name, read through the type's provider as observe reads it. Nothing
 * is written, not even the fence: an import is not a loop and binds no generation. What cannot be
 * declared (nothing there, a release whose artifact is not on the node) is a problem sentence in
 * the answer, never a failure of the whole read.
 */

export async function inventoryNode(configPath: string, request: InventoryRequest): Promise<InventoryAnswer> {
  const config = await loadAgentConfig(configPath);
  assertNode(config, request.node, configPath, `import of node "${request.node}"`);
  const ctx: NodeContext = { node: config.node, root: await realRoot(config.root, false), config };
  const answer: InventoryAnswer = {};
  if (request.include_flags) {
    for (const flag of await undeclaredFlags(ctx, new Set(Object.keys(request.resources))))
      answer[flag.resource_key] =
        flag.value === null
          ? { problem: `flags/${flag.resource_key}.json holds no JSON value Datum can declare` }
          : { spec: { type: 'flag', value: flag.value } };
  }
  for (const key of Object.keys(request.resources).sort()) {
    const { type, name } = request.resources[key];
    const provider = (RESOURCE_TYPES as readonly string[]).includes(type) ? providerFor(type) : null;
    if (provider === null)
      answer[key] = { problem: withFix(`"${type}" is not a resource type`, `use one of ${RESOURCE_TYPES.join(', ')}`) };
    else if (!provider.importSpec)
      answer[key] = {
        problem: withFix(
          `a ${type} cannot be imported: what it was made from is not on the node`,
          type === 'release' ? 'declare the release from your artifact store' : `declare the ${type} by hand`,
        ),
      };
    else answer[key] = await provider.importSpec(ctx, key, name);
  }
  return answer;
}
