/*
 * The names users and external tools rely on (docs/architecture.md §3 "The contract"): task queues,
 * workflow types and ids, search attributes, the memo. Plain `temporal workflow start/signal/
 * query/list` against these must work as docs/operations.md documents: change one only with a
 * migration note.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { sha256Hex } from './identifiers';

export const CONTROL_TASK_QUEUE = 'datum-control';
export const agentTaskQueue = (node: string) => `datum-node-${node}`;

/** The most loop shards a fleet may have (DATUM_LOOP_SHARDS): each is a task queue with its own pollers. */
export const MAX_LOOP_SHARDS = 64;

/** FNV-1a, 32 bits, over the UTF-8 bytes: the same number for the same name in every process and release. */
function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

/** The shard a node's loops run in, of `shards`: a stable rule, the node's name alone decides it. */
export const loopShardOf = (node: string, shards: number) => fnv1a32(node) % shards;

/** The task queue of shard `shard` of the loops a controller queue starts: <base>-loops-<shard>. */
export const loopShardQueue = (shard: number, base: string = CONTROL_TASK_QUEUE) => `${base}-loops-${shard}`;
/** A loop shard's queue (loopShardQueue) taken apart: its base queue and shard; null for any other queue. */
export const shardOfQueue = (queue: string): { base: string; shard: number } | null => {
  const [, base, shard] = /^(.+)-loops-(\d+)$/.exec(queue) ?? [];
  return base !== undefined && shard !== undefined ? { base, shard: Number(shard) } : null;
};

/**
 * The task queue a node's reconcileNode loops run on, when the controllers on `base` start them.
 * One shard (the default) is `base` itself, datum-control as before shards existed; with more,
 * <base>-loops-<FNV-1a(node) mod shards>, so controller workers can split a fleet's loops between
 * them (docs/operations.md "A fleet across machines"). A loop's control activities run on its own
 * queue. A separate controller (`datum worker --task-queue datum-staging`) keeps its loops on
 * queues of its own name, never on the fleet's.
 */
export const loopTaskQueue = (node: string, shards: number, base: string = CONTROL_TASK_QUEUE) =>
  shards <= 1 ? base : loopShardQueue(loopShardOf(node, shards), base);

/**
 * Workflow types, as registered by the controller worker (the export names of
 * src/workflows/index.ts, checked there against these).
 */
export const WORKFLOW_TYPES = {
  reconcileNode: 'reconcileNode',
  rollout: 'rollout',
  workItem: 'workItem',
  importNode: 'importNode',
  rolloutGate: 'rolloutGate',
  removal: 'removal',
  fleet: 'fleet',
} as const;
export type WorkflowType = (typeof WORKFLOW_TYPES)[keyof typeof WORKFLOW_TYPES];

export { reconcileWorkflowId } from './identifiers';
/** One `datum import` of a node: a read, so each run has an id of its own. */
export const importWorkflowId = (node: string, nonce: string) => `datum-import/${node}/${nonce}`;
/** One id per (generation, node set): a second `rollout start` for the same set attaches. */
export const rolloutWorkflowId = (generation: number, nodes: string[]) =>
  `datum-rollout/gen-${generation}/${nodes.length === 1 ? nodes[0] : `${nodes.length}-nodes-${sha256Hex([...nodes].sort().join(',')).slice(0, 12)}`}`;

export const DatumNode = defineSearchAttributeKey('DatumNode', SearchAttributeType.KEYWORD);
export const DatumGeneration = defineSearchAttributeKey('DatumGeneration', SearchAttributeType.INT);
export const DatumDigest = defineSearchAttributeKey('DatumDigest', SearchAttributeType.KEYWORD);
export const DatumStatus = defineSearchAttributeKey('DatumStatus', SearchAttributeType.KEYWORD);
export const DatumConditions = defineSearchAttributeKey('DatumConditions', SearchAttributeType.KEYWORD_LIST);
export const DatumMode = defineSearchAttributeKey('DatumMode', SearchAttributeType.KEYWORD);
export const DATUM_SEARCH_ATTRIBUTES = [
  DatumNode,
  DatumGeneration,
  DatumDigest,
  DatumStatus,
  DatumConditions,
  DatumMode,
] as const;

/** Memo key holding the last decision's one-line summary, shown in the Web UI's workflow list. */
export const MEMO_SUMMARY = 'summary';
/**
 * The rest of a reconcile loop's memo, what `datum nodes` shows from visibility alone: the last
 * decision's reason, when the loop last verified the node (moved at most every
 * MEMO_VERIFIED_EVERY_MS in steady state: each write is a history event) and when it started.
 */
export const MEMO_REASON = 'reason';
export const MEMO_LAST_VERIFIED = 'last_verified_at';
export const MEMO_SINCE = 'since';
export const MEMO_VERIFIED_EVERY_MS = 5 * 60_000;
/** A cancelled rollout's memo key: which nodes it started and which it never did (RolloutCancelled). */
export const MEMO_ROLLOUT_CANCELLED = 'cancelled';
