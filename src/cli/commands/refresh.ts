import { DesiredStateAuthority } from '../../activities/authority';
import { withClient } from '../../worker/connection';
import { refreshDesiredSignal, reconcileWorkflowId } from '../../contract';
import { CONNECTION_OPTIONS, parse } from '../args';
import type { Command } from '../main';
import { checkNode, loopFor } from '../nodes';
import { print, printJson } from '../output';
import { fleetDirFrom } from './worker';

/** The parse layer: options and the node, checked before the authority is read (fuzzed in test/fuzz/cli.test.ts). */
export function refreshArgs(argv: string[]) {
  const { values, positionals } = parse(
    argv,
    { fleet: { type: 'string' }, json: { type: 'boolean' }, ...CONNECTION_OPTIONS },
    true,
  );
  return { values, node: checkNode(positionals[0]) };
}

export const refreshCommand: Command = {
  summary: "re-read a node's desired state and signal the refreshed intent to its loop",
  usage: `usage: datum refresh NODE [--fleet DIR] [--json]

Reads DIR/desired/nodes/NODE.yaml (--fleet or $DATUM_FLEET) and sends refreshDesired with its
generation and digest: the same generation re-binds, a newer one hands over to
datum/NODE/gen-<new>, an older one is refused (and recorded).`,
  async run(argv) {
    const { values, node } = refreshArgs(argv);
    const read = await new DesiredStateAuthority(fleetDirFrom(values.fleet)).read(node);
    if (!read.ok) throw new Error(read.error);
    return await withClient({ address: values.address, namespace: values.namespace }, async (client) => {
      const loop = await loopFor(client, node);
      const signal = { generation: read.intent.generation, digest: read.intent.digest };
      await loop.handle.signal(refreshDesiredSignal, signal);
      const what =
        signal.generation > loop.generation
          ? `hands over from ${loop.workflowId} to ${reconcileWorkflowId(node, signal.generation)}`
          : signal.generation === loop.generation
            ? `re-binds ${loop.workflowId}`
            : `is older than ${loop.workflowId} and will be refused`;
      if (values.json) printJson({ node, workflow_id: loop.workflowId, signal });
      else print(`${node}: sent refreshDesired generation ${signal.generation} (${signal.digest.slice(0, 19)}…): ${what}.`);
      return 0;
    });
  },
};
