import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { DesiredStateAuthority } from '../../activities/authority';
import { withClient } from '../../worker/connection';
import {
  CONTROL_TASK_QUEUE,
  ROLLOUT_OUTCOMES,
  WORKFLOW_TYPES,
  rolloutProgressQuery,
  rolloutWorkflowId,
  withFix,
  type RolloutNodeProgress,
  type RolloutResult,
  type RolloutWorkflow,
} from '../../contract';
import type { ConvergenceStatus } from '../../domain';
import { CONNECTION_OPTIONS, UsageError, parse } from '../args';
import type { Command } from '../main';
import { checkNode } from '../nodes';
import { print, printJson } from '../output';
import { fleetDirFrom } from './worker';

const SETTLED_BAD = new Set<ConvergenceStatus>(['BLOCKED', 'CONFLICT']);

export const rolloutCommand: Command = {
  summary: 'start (or attach to) a rollout of a generation to nodes',
  usage: `usage: datum rollout start --generation G (--nodes N-1,N-2 | --all) [--fleet DIR] [--wait] [--json]

Starts one reconcileNode per node at generation G (or attaches to the running one), hands over
from older generations, and refuses nodes whose desired state is not at G (the others go on).
--all takes every node in DIR/desired/nodes (--fleet or $DATUM_FLEET). --wait shows per-node
progress until every node is CONVERGED, DRIFTED, BLOCKED or CONFLICT, and exits 1 if any node
ends BLOCKED or CONFLICT or was refused.`,
  async run(argv) {
    const args = await rolloutArgs(argv);
    return await withClient({ address: args.values.address, namespace: args.values.namespace }, async (client) => {
      const { workflowId, attached } = await startOrAttach(client, args.generation, args.nodes);
      if (args.values.wait) return await waitAndReport(client, workflowId, args.generation, args.values.json === true);
      if (args.values.json) printJson({ workflow_id: workflowId, generation: args.generation, nodes: args.nodes, attached });
      else {
        const which = args.values.all ? '--all' : `--nodes ${args.nodes.join(',')}`;
        print(
          `${attached ? 'Attached to' : 'Started'} rollout ${workflowId} of generation ${args.generation} to ${args.nodes.length} node(s). Watch it: datum rollout start --generation ${args.generation} ${which} --wait`,
        );
      }
      return 0;
    });
  },
};

async function fleetNodes(fleetDir: string): Promise<string[]> {
  const nodes = await new DesiredStateAuthority(fleetDir).nodes();
  if (nodes.length === 0)
    throw new UsageError(withFix(`${fleetDir}/desired/nodes has no <node>.yaml`, 'add desired state first'));
  return nodes;
}

/** The parse layer: subcommand, generation and nodes (fuzzed in test/fuzz/cli.test.ts). */
export async function rolloutArgs(argv: string[]) {
  const [sub, ...rest] = argv;
  if (sub !== 'start')
    throw new UsageError(
      sub
        ? withFix(`unknown rollout subcommand "${sub}"`, 'datum rollout start …')
        : withFix('missing subcommand', 'datum rollout start …'),
    );
  const { values } = parse(rest, {
    generation: { type: 'string' },
    nodes: { type: 'string' },
    all: { type: 'boolean' },
    fleet: { type: 'string' },
    wait: { type: 'boolean' },
    json: { type: 'boolean' },
    ...CONNECTION_OPTIONS,
  });
  const generation = Number(values.generation);
  if (!values.generation || !Number.isInteger(generation) || generation < 1)
    throw new UsageError(
      withFix(
        `--generation must be a whole number of 1 or more, got ${JSON.stringify(values.generation ?? null)}`,
        'pass the generation the desired-state files declare, such as --generation 12',
      ),
    );
  if (!!values.nodes === !!values.all)
    throw new UsageError(withFix('which nodes?', 'name them with --nodes N-1,N-2 or take every node with --all (one of them)'));
  const nodes = values.all
    ? await fleetNodes(fleetDirFrom(values.fleet))
    : values.nodes!.split(',').map((n) => checkNode(n.trim()));
  if (new Set(nodes).size !== nodes.length)
    throw new UsageError(withFix('a node is listed twice in --nodes', 'name each node once'));
  return { values, generation, nodes };
}

/** One rollout per (generation, node set): starting it again attaches to the running one. */
async function startOrAttach(
  client: Client,
  generation: number,
  nodes: string[],
): Promise<{ workflowId: string; attached: boolean }> {
  const workflowId = rolloutWorkflowId(generation, nodes);
  try {
    await client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId,
      args: [{ generation, nodes }],
    });
    return { workflowId, attached: false };
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return { workflowId, attached: true };
  }
}

/** Per-node progress lines until the rollout ends; exit 1 when a node was refused or settled badly. */
async function waitAndReport(client: Client, workflowId: string, generation: number, json: boolean): Promise<number> {
  const handle = client.workflow.getHandle<RolloutWorkflow>(workflowId);
  const shown = new Map<string, string>();
  const show = (n: RolloutNodeProgress) => {
    const line =
      n.outcome === ROLLOUT_OUTCOMES.refused
        ? `${n.node.padEnd(12)} REFUSED    ${n.error}`
        : n.outcome === ROLLOUT_OUTCOMES.pending
          ? `${n.node.padEnd(12)} ${'…'.padEnd(10)} reconciling`
          : `${n.node.padEnd(12)} ${n.status.padEnd(10)} ${n.reason}: ${n.reason_detail}`;
    if (!json && shown.get(n.node) !== line) print(line);
    shown.set(n.node, line);
  };
  let result: RolloutResult | undefined;
  const finished = handle.result().then((r) => (result = r));
  finished.catch(() => undefined);
  while (!result) {
    try {
      const progress = await handle.query(rolloutProgressQuery);
      for (const n of progress.nodes) show(n);
    } catch {
      // The query needs a worker; the result below still arrives when one runs.
    }
    await Promise.race([finished, new Promise((r) => setTimeout(r, 1000))]);
  }
  for (const n of result.nodes) show(n);
  const bad = result.nodes.filter((n) => n.outcome === ROLLOUT_OUTCOMES.refused || SETTLED_BAD.has(n.status));
  if (json) printJson({ workflow_id: workflowId, ...result });
  else {
    const attention = bad.length ? `; ${bad.map((n) => n.node).join(', ')} need attention (datum describe NODE)` : '';
    print(
      `\nGeneration ${generation}: ${result.nodes.length - bad.length} of ${result.nodes.length} node(s) settled well${attention}.`,
    );
  }
  return bad.length > 0 ? 1 : 0;
}
