import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
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
      throw new UsageError(`--generation must be a whole number of 1 or more, got ${JSON.stringify(values.generation ?? null)}`);
    if (!!values.nodes === !!values.all) throw new UsageError('name the nodes: --nodes N-1,N-2 or --all (one of them)');
    const nodes = values.all
      ? await fleetNodes(fleetDirFrom(values.fleet))
      : values.nodes!.split(',').map((n) => checkNode(n.trim()));
    if (new Set(nodes).size !== nodes.length) throw new UsageError('a node is listed twice in --nodes');

    return await withClient({ address: values.address, namespace: values.namespace }, async (client) => {
      const workflowId = rolloutWorkflowId(generation, nodes);
      let attached = false;
      try {
        await client.workflow.start<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
          taskQueue: CONTROL_TASK_QUEUE,
          workflowId,
          args: [{ generation, nodes }],
        });
      } catch (error) {
        if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
        attached = true;
      }
      const handle = client.workflow.getHandle<RolloutWorkflow>(workflowId);
      if (!values.wait) {
        if (values.json) printJson({ workflow_id: workflowId, generation, nodes, attached });
        else
          print(
            `${attached ? 'Attached to' : 'Started'} rollout ${workflowId} of generation ${generation} to ${nodes.length} node(s). Watch it: datum rollout start --generation ${generation} ${values.all ? '--all' : `--nodes ${nodes.join(',')}`} --wait`,
          );
        return 0;
      }
      const shown = new Map<string, string>();
      const show = (n: RolloutNodeProgress) => {
        const line =
          n.outcome === ROLLOUT_OUTCOMES.refused
            ? `${n.node.padEnd(12)} REFUSED    ${n.error}`
            : n.outcome === ROLLOUT_OUTCOMES.pending
              ? `${n.node.padEnd(12)} ${'…'.padEnd(10)} reconciling`
              : `${n.node.padEnd(12)} ${n.status.padEnd(10)} ${n.reason}: ${n.reason_detail}`;
        if (!values.json && shown.get(n.node) !== line) print(line);
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
      if (values.json) printJson({ workflow_id: workflowId, ...result });
      else
        print(
          `\nGeneration ${generation}: ${result.nodes.length - bad.length} of ${result.nodes.length} node(s) settled well${bad.length ? `; ${bad.map((n) => n.node).join(', ')} need attention (datum describe NODE)` : ''}.`,
        );
      return bad.length > 0 ? 1 : 0;
    });
  },
};

async function fleetNodes(fleetDir: string): Promise<string[]> {
  const nodes = await new DesiredStateAuthority(fleetDir).nodes();
  if (nodes.length === 0)
    throw new UsageError(withFix(`${fleetDir}/desired/nodes has no <node>.yaml`, 'add desired state first'));
  return nodes;
}
