import { promises as fs } from 'node:fs';
import type { Client } from '@temporalio/client';
import {
  FLEET_WORK_CONDITIONS,
  canonicalJson,
  fleetConditions,
  fleetFingerprint,
  sha256Hex,
  type DeclaredNode,
  type UnservedShard,
} from '../domain';
import {
  MEMO_VERIFIED_EVERY_MS,
  CONTROL_TASK_QUEUE,
  isNodeId,
  shardOfQueue,
  workQuery,
  type FleetLook,
  type FleetLookInput,
  type PassReport,
  type WorkTargetInput,
} from '../contract';
import { reportWork } from './work';
import { listNodes, missingLoops, workflowPollersOn } from '../worker/fleet-loops';
import type { DesiredStateAuthority } from './authority';
import { mapLimit } from './map-limit';

/*
 * The fleet workflow's look (src/workflows/fleet.ts), a local activity on the controller: the
 * authority's nodes, the running loops (one visibility list), the declared nodes without one and
 * how their last loop ended. Cheap where nothing changed: a desired-state file is read again only
 * when its stat changes, a closed run's close event is read once, and the conditions go back to
 * the workflow only when they differ from what it holds.
 */

interface SeenFile {
  stamp: string;
  node: DeclaredNode;
}

/** What a look remembers between looks: each file's stat and reading, each closed run's close event. */
export interface LookMemory {
  files: Map<string, SeenFile>;
  closes: Map<string, string>;
}

export const lookMemory = (): LookMemory => ({ files: new Map(), closes: new Map() });

export function createFleetActivities(authority: DesiredStateAuthority, client: () => Client) {
  const memory = lookMemory();
  return {
    lookAtFleet: (input: FleetLookInput): Promise<FleetLook> => lookAtFleet(client(), authority, memory, input.known),
  };
}

/**
 * One look: the authority's nodes against the running loops. `datum status --fleet DIR` runs the
 * same look from the CLI, against that directory instead of the fleet workflow's.
 */
export async function lookAtFleet(
  c: Client,
  authority: DesiredStateAuthority,
  memory: LookMemory,
  known: string | null,
): Promise<FleetLook> {
  const [declared, loops] = await Promise.all([declaredNodes(authority, memory.files), listNodes(c)]);
  const names = declared.map((d) => d.node);
  const missing = await missingLoops(c, names, new Set(loops.map((l) => l.node)), true, memory.closes);
  const now = new Date().toISOString();
  const unserved = await unservedShards(c, loops);
  const { drafts, counts } = fleetConditions({
    declared,
    loops,
    missing,
    now,
    memo_lag_ms: MEMO_VERIFIED_EVERY_MS,
    unserved_shards: unserved,
  });
  const fingerprint = fleetFingerprint(drafts);
  const seen = declared.map((d) => [d.node, d.generation, d.digest]);
  return {
    looked_at: now,
    counts,
    authority: { nodes: declared.length, digest: `sha256:${sha256Hex(canonicalJson(seen))}` },
    fingerprint,
    conditions: fingerprint === known ? null : drafts,
  };
}

/**
 * The loop shards' queues (`<queue>-loops-<k>`) where the server has seen no controller poll for
 * workflow tasks lately: one DescribeTaskQueue per shard that has loops. A shard's queue has one
 * partition, whose pollers the call reads; datum-control may have several
 * (deploy/temporal/dynamicconfig/production.yaml), and `datum status` already says when no
 * controller polls it (the fleet is then unwatched). A queue the server could not describe is
 * left out: the look claims only what it saw.
 */
async function unservedShards(c: Client, loops: Array<{ task_queue: string }>): Promise<UnservedShard[]> {
  const shards = [...new Set(loops.map((l) => l.task_queue))].sort().flatMap((queue): UnservedShard[] => {
    const parts = shardOfQueue(queue);
    return parts ? [{ queue, ...parts, fleet_queue: parts.base === CONTROL_TASK_QUEUE }] : [];
  });
  const unserved = await mapLimit(shards, 8, async (s) => {
    const polling = await workflowPollersOn(c, s.queue).catch(() => null);
    return polling?.count === 0 ? s : null;
  });
  return unserved.filter((s) => s !== null);
}

/** Every declared node's generation, digest and policy; a file is read again only when its stat changed. */
async function declaredNodes(authority: DesiredStateAuthority, files: Map<string, SeenFile>): Promise<DeclaredNode[]> {
  const listed = await authority.nodes().catch((error: unknown) => {
    // No desired/nodes at all is a fleet that declares nothing; anything else the look cannot judge.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  });
  // A file whose name is no node name is the authority's problem (`datum validate` names it), not a node.
  const nodes = listed.filter(isNodeId);
  for (const gone of [...files.keys()].filter((n) => !nodes.includes(n))) files.delete(gone);
  return mapLimit(nodes, 16, async (node): Promise<DeclaredNode> => {
    const stat = await fs.stat(authority.fileFor(node)).catch(() => null);
    const stamp = stat ? `${stat.mtimeMs}:${stat.size}:${stat.ino}` : 'gone';
    const known = files.get(node);
    if (known?.stamp === stamp) return known.node;
    const read = await authority.read(node);
    const seen: DeclaredNode = read.ok
      ? { node, generation: read.intent.generation, digest: read.intent.digest, policy: read.intent.policy }
      : { node, generation: null, digest: null, policy: null };
    files.set(node, { stamp, node: seen });
    return seen;
  });
}

/** The fleet's side of work items: its reports, and the items an earlier fleet run opened. */
export function createFleetWorkActivities(client: () => Client, escalateAfter: string) {
  return {
    async reportFleetWork(input: { reports: Array<{ report: PassReport; open: WorkTargetInput[]; tell: string[] }> }) {
      const c = client();
      await mapLimit(input.reports, 8, (r) => reportWork(c, { ...r, discover: false }, escalateAfter));
    },
    async openFleetItems(): Promise<string[]> {
      const ids: string[] = [];
      for await (const w of client().workflow.list({
        query: workQuery({ conditions: [...FLEET_WORK_CONDITIONS] }),
        pageSize: 1000,
      }))
        ids.push(w.workflowId);
      return ids;
    },
  };
}
