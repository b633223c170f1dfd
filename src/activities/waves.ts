import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { stringify } from 'yaml';
import { NOTE_REASONS, withFix, type GateEntry, type RollbackRecord, type RollbackTarget, type RolloutAct } from '../contract';
import type { BoundIntent, LedgerEntry } from '../domain';
import { parseDesiredStateText } from '../schemas/documents';
import type { DesiredStateAuthority } from './authority';
import type { LedgerStore } from './ledger-store';
import { mapLimit } from './map-limit';

/*
 * The controller's side of a rollout in waves (docs/operations.md, "A first production change, in
 * waves"): the gate reads each loop's latest decision from the ledger store, and a rollback
 * writes earlier content back to the authority as a new generation whose file says so.
 */

const isNote = (reason: string) => (NOTE_REASONS as readonly string[]).includes(reason);

function gateEntryOf(e: LedgerEntry): GateEntry {
  return {
    workflow_id: e.workflow_id,
    seq: e.seq,
    decided_at: e.decided_at,
    generation: e.desired_generation,
    digest: e.desired_digest,
    status: e.convergence_status,
    reason: e.reason,
    reason_detail: e.reason_detail,
    observation_fresh: e.observation_fresh,
    not_before: e.recheck_trigger.not_before,
  };
}

/** A loop's id names its generation: datum/<node>/gen-<G>. */
const generationOf = (workflowId: string) => Number(/\/gen-(\d+)$/.exec(workflowId)?.[1] ?? NaN);

export function createWaveActivities(authority: DesiredStateAuthority, ledger: () => LedgerStore) {
  return {
    /** Each loop's latest recorded decision at the generation (a note never counts), as the store has it. */
    async gateEvidence(input: {
      generation: number;
      nodes: Array<{ node: string; workflow_id: string }>;
    }): Promise<Array<{ node: string; entry: GateEntry | null }>> {
      const store = ledger();
      return mapLimit(input.nodes, 16, async ({ node, workflow_id }) => {
        const entries = await store.list(node, { workflowId: workflow_id });
        const latest = [...entries].reverse().find((e) => e.desired_generation === input.generation && !isNote(e.reason));
        return { node, entry: latest ? gateEntryOf(latest) : null };
      });
    },

    /** Per node: the content its loop had before this rollout, to be written as generation+1; or why not. */
    async rollbackPlan(input: {
      generation: number;
      nodes: Array<{ node: string; handed_over_from: string[] }>;
    }): Promise<RollbackTarget[]> {
      const store = ledger();
      return mapLimit(input.nodes, 16, async ({ node, handed_over_from }) => {
        const found = await earlierContent(store, node, handed_over_from);
        return 'error' in found ? { node, error: found.error } : { ...found, node, to_generation: input.generation + 1 };
      });
    },

    async writeRollback(input: {
      rollout: string;
      item: string;
      generation: number;
      targets: RollbackTarget[];
      act: RolloutAct;
    }): Promise<RollbackRecord['nodes']> {
      const store = ledger();
      return mapLimit(input.targets, 8, async (t) => {
        if ('error' in t) return { node: t.node, outcome: 'refused' as const, error: t.error };
        try {
          return await writeOne(authority, store, input, t);
        } catch (error) {
          return { node: t.node, outcome: 'refused' as const, error: (error as Error).message };
        }
      });
    },
  };
}

/** The loop this rollout handed the node over from, and the content it was last bound to, as the store kept it. */
async function earlierContent(
  store: LedgerStore,
  node: string,
  handedOverFrom: string[],
): Promise<{ content_of: number; digest: string } | { error: string }> {
  const older = [...handedOverFrom].sort((a, b) => generationOf(b) - generationOf(a))[0];
  if (older === undefined)
    return {
      error: withFix(
        `${node} had no loop at an earlier generation when this rollout started it, so there is no earlier content to go back to`,
        `write ${node}'s desired state by hand`,
      ),
    };
  const last = (await store.list(node, { workflowId: older })).at(-1);
  if (!last) return { error: withFix(`the ledger store has no entry of ${older}`, `write ${node}'s desired state by hand`) };
  const kept = await store.keptIntent(node, last.desired_generation, last.desired_digest);
  if (!kept)
    return {
      error: withFix(
        `the ledger store did not keep generation ${last.desired_generation} of ${node} (${last.desired_digest}): it keeps what loops bind, never content marked sensitive`,
        `restore ${node}'s desired state by hand from the authority's history`,
      ),
    };
  return { content_of: kept.generation, digest: kept.digest };
}

type Written = Extract<RollbackRecord['nodes'][number], { outcome: 'written' }>;

/**
 * One node's rollback: only over the generation the rollout rolled out (a file moved on since is
 * someone else's change), only content that makes the digest it was kept under, and the file's
 * header says what it is, for whom and why.
 */
async function writeOne(
  authority: DesiredStateAuthority,
  store: LedgerStore,
  input: { rollout: string; item: string; generation: number; act: RolloutAct },
  t: Extract<RollbackTarget, { digest: string }>,
): Promise<Written> {
  const now = await authority.read(t.node);
  if (!now.ok || now.intent.generation !== input.generation)
    throw new Error(
      withFix(
        `${authority.fileFor(t.node)} is ${now.ok ? `at generation ${now.intent.generation}` : `not valid desired state (${now.error.split('\n')[0]})`}, not the ${input.generation} this rollout rolled out, so a rollback would overwrite someone else's change`,
        `decide by hand what ${t.node}'s desired state should be`,
      ),
    );
  const kept = await store.keptIntent(t.node, t.content_of, t.digest);
  if (!kept)
    throw new Error(withFix(`the content of generation ${t.content_of} of ${t.node} is no longer kept`, 'write it by hand'));
  const text = rollbackText(kept, t.to_generation, now.intent.labels, input);
  const source = path.relative(authority.fleetDir, authority.fileFor(t.node));
  const check = parseDesiredStateText(text, source, { revision: 'rollback', author: null, loaded_at: input.act.at }, t.node);
  if (check.digest !== t.digest)
    throw ApplicationFailure.nonRetryable(
      `the rollback of ${t.node} would bind ${check.digest}, not the ${t.digest} of generation ${t.content_of}; nothing was written`,
      'RollbackContentMismatch',
    );
  const file = await authority.replace(t.node, text);
  return { node: t.node, outcome: 'written', generation: t.to_generation, content_of: t.content_of, digest: t.digest, file };
}

/** One line of a YAML comment: no line breaks or control characters, and not too long. */
const commentText = (s: string) =>
  [...s]
    .map((c) => (c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f ? ' ' : c))
    .join('')
    .slice(0, 300);

function rollbackText(
  kept: BoundIntent,
  generation: number,
  labels: Record<string, string> | undefined,
  input: { rollout: string; item: string; act: RolloutAct },
): string {
  const who = `${input.act.by}${input.act.identity ? ` (identity ${input.act.identity})` : ''}`;
  const header = [
    `Generation ${generation} of ${kept.node} is a rollback to the content of generation ${kept.generation} (${kept.digest}),`,
    `written by Datum for ${who} at ${input.act.at},`,
    `resolving ${input.item} of rollout ${input.rollout}.`,
    ...(input.act.note ? [`Note: ${input.act.note}`] : []),
  ].map((l) => `# ${commentText(l)}`);
  const doc = {
    node: kept.node,
    generation,
    ...(labels ? { labels } : {}),
    resources: kept.resources,
    policy: kept.policy,
  };
  return `${header.join('\n')}\n${stringify(doc)}`;
}
