import { canonicalJson, targetOfAction, type AuthorizedAction, type ExecutionEvidence, type FenceReset } from '../../domain';
import { readClaims } from './claims';
import { openAppendAt, readJsonAt, sha256, writeJsonAt, inDatumDir } from '../fs';
import { withLock } from './lock';
import { sameMarker } from '../markers';
import { executionEvidence, fenceReset } from '../../schemas';

export { withLock, probeLocksForTests } from './lock';

/*
 * What the agent remembers across restarts, under <root>/.datum/:
 *   fence.json            the newest desired_generation accepted for the node (fencing: once
 *                         generation G observed the node, acted on it or recorded a decision on
 *                         it, nothing below G writes to it or records a decision on it), per
 *                         resource_key the newest that acted on it, and per target the marker
 *                         Datum's own last write left
 *   journal/<key>.json    the evidence of every applied action, by journal key (idempotency)
 *   fence-resets.jsonl    every move of the node's fence back down by an operator (`datum agent
 *                         reset-fence`), one JSON object a line; fence.json keeps the last one
 * Both are written atomically and fsynced before apply returns, so a result the workflow
 * never received (the agent died first) is replayed on retry instead of acted on twice.
 * fence.json is read, changed and written under one lock per root: observe, apply and
 * recordDecision all move it, and they run concurrently. An apply's irreversible step runs under
 * that lock too, right after its fence check (whileFenced).
 */

/** journal key = sha256 of (idempotency_key, observed_marker, action_seq). */
export function journalKey(action: Pick<AuthorizedAction, 'idempotency_key' | 'observed_marker' | 'action_seq'>): string {
  return sha256(canonicalJson([action.idempotency_key, action.observed_marker, action.action_seq]));
}

interface Acceptance {
  generation: number;
  accepted_at: string;
  idempotency_key: string;
}

/** What moved the node's fence to its generation: a reset is an operator's move back down. */
export type FenceMove = 'apply' | 'observe' | 'decision' | 'reset';

interface NodeFence {
  generation: number;
  accepted_at: string;
  /** Absent in entries an apply wrote (the only kind before observes and decisions moved the fence). */
  by?: Exclude<FenceMove, 'apply'>;
  /** The resource of the apply or decision that moved it; none for an observe. */
  resource_key?: string;
  idempotency_key?: string;
}

/** What Datum's own last write to a target left behind, and the resource key it wrote under. */
export interface OwnWrite {
  marker: string;
  generation: number;
  at: string;
  resource_key: string;
}

/** The same, per resource key, as the release before per-target records kept it. */
type KeyedWrite = Omit<OwnWrite, 'resource_key'>;

interface FenceFile {
  /** The newest generation accepted for the node (absent in files written before per-node fencing). */
  node?: NodeFence;
  resources: Record<string, Acceptance>;
  /**
   * The marker Datum's own last write left, per target (file:<path>, flag:<name>, release:current,
   * service:<key>): a marker moved by Datum is not another writer, whatever key wrote it (a
   * hand-over that renames a resource writes one target under two keys).
   */
  written_targets?: Record<string, OwnWrite>;
  /** The last time an operator moved the node's fence back down (`datum agent reset-fence`). */
  reset?: FenceReset;
  /** Entries of `written` whose key the claims record could not map to a target when migrated. */
  written_keys?: Record<string, KeyedWrite>;
  /** Per resource key, as the release before written_targets wrote it: migrated on load. */
  written?: Record<string, KeyedWrite>;
}

/** The newest generation accepted for the node, what accepted it, and for which resource. */
export interface AcceptedGeneration {
  generation: number;
  by: FenceMove;
  resource_key: string | null;
}

/** The lock every change of `root`'s fence, and every write behind the fence, runs under. */
export const fenceLockKey = (root: string) => `fence:${root}`;

export interface JournalEntry {
  journal_key: string;
  recorded_at: string;
  action: Omit<AuthorizedAction, 'spec'>;
  evidence: ExecutionEvidence;
}

export class AgentJournal {
  constructor(private readonly root: string) {}

  /**
   * The newest generation accepted for the node, and what accepted it; null if none was. A fence
   * written before per-node fencing has only per-resource entries: the newest of those is the node's.
   */
  async acceptedGeneration(): Promise<AcceptedGeneration | null> {
    return newestAccepted(await this.readFence());
  }

  /**
   * Accepts the action's generation for the node before anything is written, so a write of G
   * that is interrupted still fences every generation below G out of the node.
   */
  async accept(action: AuthorizedAction, at: Date): Promise<void> {
    await this.update((fence) => acceptInto(fence, action, at), `accept ${action.desired_generation}`);
  }

  /**
   * Moves the node's fence up to `generation`, never down, for an observe or a recorded decision
   * of that generation: once its loop has seen the node, an older loop's pass still in flight
   * writes nothing there, even when the newer loop had nothing to write.
   */
  async advance(generation: number, by: 'observe' | 'decision', at: Date, resourceKey?: string): Promise<void> {
    await this.update((fence) => {
      const accepted = newestAccepted(fence);
      if (accepted !== null && accepted.generation >= generation) return;
      fence.node = { generation, accepted_at: at.toISOString(), by, ...(resourceKey ? { resource_key: resourceKey } : {}) };
    }, `advance ${generation}`);
  }

  /**
   * Moves the node's fence back down to `to`, the one move down there is: an operator's, after a
   * generation was published by mistake (`datum agent reset-fence`, which holds the root so no
   * agent runs meanwhile, src/agent/node/holder.ts). Refused unless `to` is below the fence. The
   * acceptances above `to` go (the per-resource ones too, or they would hold the fence up); the
   * reset is kept in fence.json, reported with every snapshot, and appended to fence-resets.jsonl.
   */
  async reset(to: number, by: string, reason: string, at: Date): Promise<FenceReset> {
    let done: FenceReset | null = null;
    await this.update((fence) => {
      const accepted = newestAccepted(fence);
      if (accepted === null || to >= accepted.generation) throw new FenceNotAbove(to, accepted?.generation ?? null);
      done = fenceReset.parse({ at: at.toISOString(), by, reason, from: accepted.generation, to });
      fence.node = { generation: to, accepted_at: done.at, by: 'reset' };
      for (const [key, a] of Object.entries(fence.resources)) if (a.generation > to) delete fence.resources[key];
      fence.reset = done;
    });
    const record = done as FenceReset | null;
    if (record === null) throw new Error('unreachable: the fence was reset without a record');
    await inDatumDir(
      this.root,
      '',
      false,
      async (dir) => {
        const log = await openAppendAt(dir, 'fence-resets.jsonl', 0o644);
        try {
          await log.write(`${JSON.stringify(record)}\n`);
          await log.sync();
        } finally {
          await log.close();
        }
      },
      undefined,
    );
    return record;
  }

  /** The last reset of the node's fence; null when there was none (or the record is damaged). */
  async lastReset(): Promise<FenceReset | null> {
    const parsed = fenceReset.safeParse((await this.readFence()).reset);
    return parsed.success ? parsed.data : null;
  }

  /**
   * Runs `write`, a provider's irreversible step (the rename of a file or flag, the switch of
   * `current`, a service's stop and start), right after `admit` passed, both under the lock every
   * change to the fence takes: no observe, apply or decision moves the fence between the check and
   * the write, so an observe of a newer generation either sees the write or fences it out. `admit`
   * gets the fence as it is now and throws to refuse, and then nothing is written; what it returns
   * is handed to `write` (the marker the re-check saw). Neither may
   * change the fence itself (the lock is not re-entrant).
   */
  async whileFenced<A, T>(
    admit: (accepted: AcceptedGeneration | null) => Promise<A>,
    write: (admitted: A) => Promise<T>,
    label = 'write',
  ): Promise<T> {
    const step = async () => await write(await admit(await this.acceptedGeneration()));
    return await withLock(this.fenceLock, step, label);
  }

  async lookup(key: string): Promise<JournalEntry | null> {
    const entry = (await this.readRecord('journal', `${key}.json`)) as JournalEntry | null;
    if (entry === null) return null;
    return { ...entry, evidence: executionEvidence.parse(entry.evidence) };
  }

  async record(action: AuthorizedAction, evidence: ExecutionEvidence, at: Date): Promise<void> {
    const key = journalKey(action);
    const { spec: _spec, ...summary } = action;
    const entry: JournalEntry = { journal_key: key, recorded_at: at.toISOString(), action: summary, evidence };
    await inDatumDir(this.root, 'journal', true, (dir) => writeJsonAt(dir, `${key}.json`, entry), undefined);
    await this.update((fence) => {
      acceptInto(fence, action, at);
      if (evidence.marker_after === null) return;
      const own = { marker: evidence.marker_after, generation: action.desired_generation, at: at.toISOString() };
      const target = targetOfAction(action.action, action.resource_key, action.spec);
      if (target === null) fence.written_keys = { ...fence.written_keys, [action.resource_key]: own };
      else fence.written_targets = { ...fence.written_targets, [target]: { ...own, resource_key: action.resource_key } };
    });
    await this.removePending(key);
  }

  /**
   * Marks `marker` as Datum's own write to the action's target without a result to journal: an
   * earlier attempt of the action wrote part of it and died (see landedEarlier in apply.ts), so a
   * plan made before that write is out of date, not contested by another writer.
   */
  async noteOwnWrite(action: AuthorizedAction, marker: string, at: Date): Promise<void> {
    const target = targetOfAction(action.action, action.resource_key, action.spec);
    const own = { marker, generation: action.desired_generation, at: at.toISOString() };
    await this.update((fence) => {
      if (target === null) fence.written_keys = { ...fence.written_keys, [action.resource_key]: own };
      else fence.written_targets = { ...fence.written_targets, [target]: { ...own, resource_key: action.resource_key } };
    });
  }

  /**
   * Written right before a provider writes and removed once the result is journalled
   * (<root>/.datum/pending/<journal key>.json, outside the journal its pruning counts): after a
   * crash in between, a retry of the same action can tell its own landed write from another
   * writer's.
   */
  async intend(action: AuthorizedAction, at: Date): Promise<void> {
    const { spec: _spec, ...summary } = action;
    const record = { at: at.toISOString(), action: summary };
    await inDatumDir(this.root, 'pending', true, (dir) => writeJsonAt(dir, `${journalKey(action)}.json`, record), undefined);
  }

  /** Nothing was written after all (the provider refused): no earlier attempt to find. */
  async unintend(action: AuthorizedAction): Promise<void> {
    await this.removePending(journalKey(action));
  }

  /** An earlier attempt of this very action started writing and was never journalled. */
  async intended(action: AuthorizedAction): Promise<boolean> {
    return (await this.readRecord('pending', `${journalKey(action)}.json`)) !== null;
  }

  private async removePending(key: string): Promise<void> {
    await inDatumDir(this.root, 'pending', false, (dir) => dir.remove(`${key}.json`), undefined);
  }

  /** One of the records under .datum/<sub> (sub "" for .datum itself); null when absent. */
  private async readRecord(sub: string, name: string): Promise<unknown> {
    return await inDatumDir(this.root, sub, false, (dir) => readJsonAt(dir, name), null);
  }

  /**
   * Datum's own last write to `target`, when it left `marker`; null otherwise. By target, so a
   * write under another key (a resource renamed by a hand-over) is still Datum's own; by key only
   * for what the earlier release recorded under a key the claims record could not map.
   */
  async ownWrite(target: string | null, resourceKey: string, marker: string | null): Promise<OwnWrite | null> {
    if (marker === null) return null;
    const fence = await this.readFence();
    const byTarget = target === null ? undefined : fence.written_targets?.[target];
    if (byTarget !== undefined && sameMarker(byTarget.marker, marker)) return byTarget;
    const byKey = fence.written_keys?.[resourceKey];
    return byKey !== undefined && sameMarker(byKey.marker, marker) ? { ...byKey, resource_key: resourceKey } : null;
  }

  /** The fence as this release reads it: the earlier release's records migrated (stored at the next write). */
  private async readFence(): Promise<FenceFile> {
    return await this.migrated(asFence(await this.readRecord('', 'fence.json')));
  }

  /**
   * Reads, changes and writes the fence under its lock, so observes, applies and decisions that
   * run at once each keep the others' moves. Written only when something changed (a migration of
   * the earlier release's records counts).
   */
  private async update(change: (fence: FenceFile) => void, label = 'update'): Promise<void> {
    await withLock(
      this.fenceLock,
      async () => {
        await inDatumDir(
          this.root,
          '',
          true,
          async (dir) => {
            const raw = await readJsonAt(dir, 'fence.json');
            const fence = await this.migrated(asFence(raw));
            change(fence);
            if (JSON.stringify(fence) !== JSON.stringify(raw)) await writeJsonAt(dir, 'fence.json', fence);
          },
          undefined,
        );
      },
      label,
    );
  }

  /**
   * The release before this one kept Datum's own writes per resource key (`written`). Each moves
   * to the target its key claimed last (claims.json), where the later of two writes to a target
   * wins (only the last one's marker can still be there); a key the claims record does not know
   * stays a by-key record (`written_keys`). Nothing it knew is lost, so an upgrade causes no
   * false MARKER_MOVED.
   */
  private async migrated(fence: FenceFile): Promise<FenceFile> {
    const { written, ...rest } = fence;
    if (!written || typeof written !== 'object') return fence;
    const claims = await readClaims(this.root);
    const targets = { ...rest.written_targets };
    const keys = { ...rest.written_keys };
    for (const [key, w] of Object.entries(written)) {
      const target = claims.keys[key]?.target;
      const prior = target === undefined ? undefined : targets[target];
      if (target === undefined) keys[key] = w;
      else if (!prior || Date.parse(w.at) > Date.parse(prior.at)) targets[target] = { ...w, resource_key: key };
    }
    return { ...rest, written_targets: targets, ...(Object.keys(keys).length > 0 ? { written_keys: keys } : {}) };
  }

  private get fenceLock(): string {
    return fenceLockKey(this.root);
  }
}

/** A reset that would not move the fence down: `to` is not below it, or there is no fence. */
export class FenceNotAbove extends Error {
  constructor(
    readonly to: number,
    readonly current: number | null,
  ) {
    super(
      current === null
        ? `no generation was ever accepted for this node, so there is no fence to move back to ${to}`
        : `generation ${to} is not below the node's fence, generation ${current}`,
    );
    this.name = 'FenceNotAbove';
  }
}

/** A fence file as read (a copy, so a change compares against what is on disk); empty when absent or damaged. */
function asFence(data: unknown): FenceFile {
  const fence = data as FenceFile | null;
  return fence && typeof fence === 'object' && fence.resources ? structuredClone(fence) : { resources: {} };
}

function newestAccepted(fence: FenceFile): AcceptedGeneration | null {
  let best: AcceptedGeneration | null = fence.node
    ? { generation: fence.node.generation, by: fence.node.by ?? 'apply', resource_key: fence.node.resource_key ?? null }
    : null;
  for (const [resource_key, a] of Object.entries(fence.resources)) {
    if (best === null || a.generation > best.generation) best = { generation: a.generation, by: 'apply', resource_key };
  }
  return best;
}

function acceptInto(fence: FenceFile, action: AuthorizedAction, at: Date): void {
  const acceptance = {
    generation: action.desired_generation,
    accepted_at: at.toISOString(),
    idempotency_key: action.idempotency_key,
  };
  if (!fence.node || fence.node.generation < action.desired_generation)
    fence.node = { ...acceptance, resource_key: action.resource_key };
  const prior = fence.resources[action.resource_key];
  if (!prior || prior.generation < action.desired_generation) fence.resources[action.resource_key] = acceptance;
}
