import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { CONTROL_TASK_QUEUE, loopTaskQueue, type AuthorityRead, type ControlActivities } from '../contract';
import type { LedgerEntry, NodeHold, OperatorDecision } from '../domain';
import { sensitiveGuard } from '../codec/sensitive';
import { DesiredStateAuthority } from './authority';
import { operatorDecisionsOf, type LedgerStore } from './ledger-store';
import { createRequesterActivities } from './requesters';
import { endNodeLoops, intentKeeper } from './removals';
import { createRolloutActivities } from './rollout';
import { createWaveActivities } from './waves';
import { createFleetActivities, createFleetWorkActivities } from './fleet';
import { createWorkActivities, workEscalateAfter } from './work';

export interface ControlDeps {
  fleetDir: string;
  /** Needed by the rollout's activities (start, attach, signal, query reconcile workflows). */
  client?: Client;
  /** The fleet-wide ledger (SQLite by default, PostgreSQL with DATUM_LEDGER_URL). */
  ledger?: LedgerStore;
  /** How long a work item may stay unclaimed before it escalates (default DATUM_WORK_ESCALATE_AFTER, else 1h). */
  workEscalateAfter?: string;
  /** How many shards the fleet's loops run in (DATUM_LOOP_SHARDS, loopTaskQueue); default 1. */
  loopShards?: number;
  /** The controller queue whose loops these activities start (loopTaskQueue's base); default datum-control. */
  loopQueueBase?: string;
}

/**
 * The controller's activities. readAuthority runs as a local activity: it only reads the
 * fleet directory next to the worker, and a pass must not pay three history events for it.
 */
export function createControlActivities(deps: ControlDeps): ControlActivities {
  const authority = new DesiredStateAuthority(deps.fleetDir);
  // A sensitive file's content never enters history in clear (src/codec/sensitive.ts).
  const guardSensitive = sensitiveGuard();
  const keep = intentKeeper(deps.ledger);
  const workClient = () => clientOf(deps, 'work items');
  const escalateAfter = deps.workEscalateAfter ?? workEscalateAfter();
  return {
    async readAuthority(node: string): Promise<AuthorityRead> {
      const read = await authority.read(node);
      await keep(read);
      return guardSensitive(read);
    },
    /** Idempotent by (workflow_id, chain_id, seq): a retried append never writes twice. */
    async appendLedger(input: { entry: LedgerEntry; chain_id: string }): Promise<'appended' | 'duplicate'> {
      if (!deps.ledger)
        throw ApplicationFailure.nonRetryable('this worker was started without a ledger store', 'MisconfiguredWorker');
      return deps.ledger.append(input.entry, input.chain_id);
    },
    /** A worker without a ledger store has none to read: the agent's own record is all there is. */
    async storedDecisions(node: string): Promise<OperatorDecision[]> {
      return deps.ledger ? await operatorDecisionsOf(deps.ledger, node) : [];
    },
    /** The hold on the node's latest stored entry: a hold outlives the loop that took it (a hand-over, a new generation). */
    async storedHold(node: string): Promise<NodeHold | null> {
      const [latest] = deps.ledger ? await deps.ledger.list(node, { limit: 1, newest: true }) : [];
      return latest?.hold ?? null;
    },
    ...createRolloutActivities(authority, () => clientOf(deps, 'rollouts'), {
      keep,
      escalateAfter,
      loopQueue: (node) => loopTaskQueue(node, deps.loopShards ?? 1, deps.loopQueueBase ?? CONTROL_TASK_QUEUE),
    }),
    ...createWaveActivities(authority, () => ledgerOf(deps, 'a rollout in waves')),
    endNodeLoops: (input) => endNodeLoops(clientOf(deps, 'a decommission'), authority, input),
    ...createFleetActivities(authority, () => clientOf(deps, 'the fleet view')),
    ...createWorkActivities(workClient, escalateAfter, deps.ledger),
    ...createFleetWorkActivities(workClient, escalateAfter),
    ...createRequesterActivities(() => clientOf(deps, 'reading who sent a signal')),
  };
}

function ledgerOf(deps: ControlDeps, what: string): LedgerStore {
  if (!deps.ledger)
    throw ApplicationFailure.nonRetryable(`this worker was started without a ledger store for ${what}`, 'MisconfiguredWorker');
  return deps.ledger;
}

function clientOf(deps: ControlDeps, what: string): Client {
  if (!deps.client)
    throw ApplicationFailure.nonRetryable(`this worker was started without a Temporal client for ${what}`, 'MisconfiguredWorker');
  return deps.client;
}

export type { AuthorityRead, ControlActivities };
