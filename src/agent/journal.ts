import { promises as fs } from 'node:fs';
import path from 'node:path';
import { canonicalJson, executionEvidence, type AuthorizedAction, type ExecutionEvidence } from '../domain';
import { atomicWriteJson, readJsonOrNull, sha256 } from './fsx';
import { datumPath } from './paths';

/*
 * What the agent remembers across restarts, under <root>/.datum/:
 *   fence.json            newest desired_generation accepted for the node, and per resource_key
 *                         (fencing: once generation G acted on the node, nothing below G acts on it),
 *                         and the marker Datum's own last write left per resource_key
 *   journal/<key>.json    the evidence of every applied action, by journal key (idempotency)
 * Both are written atomically and fsynced before apply returns, so a result the workflow
 * never received (the agent died first) is replayed on retry instead of acted on twice.
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

interface FenceFile {
  /** The newest generation accepted for any resource of the node (absent in files written before per-node fencing). */
  node?: Acceptance & { resource_key: string };
  resources: Record<string, Acceptance>;
  /** The marker Datum's own last write left, per resource_key: a marker moved by Datum is not another writer. */
  written?: Record<string, OwnWrite>;
}

/** What Datum's own last write to a resource left behind. */
export interface OwnWrite {
  marker: string;
  generation: number;
  at: string;
}

export interface JournalEntry {
  journal_key: string;
  recorded_at: string;
  action: Omit<AuthorizedAction, 'spec'>;
  evidence: ExecutionEvidence;
}

export class AgentJournal {
  constructor(private readonly root: string) {}

  /**
   * The newest generation accepted for the node, for any resource, and the resource it was
   * accepted for; null if none was. A fence written before per-node fencing has only per-resource
   * entries: the newest of those is the node's.
   */
  async acceptedGeneration(): Promise<{ generation: number; resource_key: string } | null> {
    const fence = await this.readFence();
    let best: { generation: number; resource_key: string } | null = fence.node
      ? { generation: fence.node.generation, resource_key: fence.node.resource_key }
      : null;
    for (const [resource_key, a] of Object.entries(fence.resources)) {
      if (best === null || a.generation > best.generation) best = { generation: a.generation, resource_key };
    }
    return best;
  }

  /**
   * Accepts the action's generation for the node before anything is written, so a write of G
   * that is interrupted still fences every generation below G out of the node.
   */
  async accept(action: AuthorizedAction, at: Date): Promise<void> {
    const fence = await this.readFence();
    const acceptance = {
      generation: action.desired_generation,
      accepted_at: at.toISOString(),
      idempotency_key: action.idempotency_key,
    };
    const nodeNewer = !fence.node || fence.node.generation < action.desired_generation;
    const prior = fence.resources[action.resource_key];
    const resourceNewer = !prior || prior.generation < action.desired_generation;
    if (!nodeNewer && !resourceNewer) return;
    if (nodeNewer) fence.node = { ...acceptance, resource_key: action.resource_key };
    if (resourceNewer) fence.resources[action.resource_key] = acceptance;
    await atomicWriteJson(await datumPath(this.root, 'fence.json'), fence);
  }

  async lookup(key: string): Promise<JournalEntry | null> {
    const entry = (await readJsonOrNull(await this.entryPath(key))) as JournalEntry | null;
    if (entry === null) return null;
    return { ...entry, evidence: executionEvidence.parse(entry.evidence) };
  }

  async record(action: AuthorizedAction, evidence: ExecutionEvidence, at: Date): Promise<void> {
    const key = journalKey(action);
    const { spec: _spec, ...summary } = action;
    const entry: JournalEntry = { journal_key: key, recorded_at: at.toISOString(), action: summary, evidence };
    await atomicWriteJson(await this.entryPath(key), entry);
    await this.accept(action, at);
    if (evidence.marker_after !== null) {
      const fence = await this.readFence();
      fence.written = {
        ...fence.written,
        [action.resource_key]: { marker: evidence.marker_after, generation: action.desired_generation, at: at.toISOString() },
      };
      await atomicWriteJson(await datumPath(this.root, 'fence.json'), fence);
    }
    await fs.rm(await this.pendingPath(key), { force: true });
  }

  /**
   * Written right before a provider writes and removed once the result is journalled
   * (<root>/.datum/pending/<journal key>.json, outside the journal its pruning counts): after a
   * crash in between, a retry of the same action can tell its own landed write from another
   * writer's.
   */
  async intend(action: AuthorizedAction, at: Date): Promise<void> {
    const { spec: _spec, ...summary } = action;
    await atomicWriteJson(await this.pendingPath(journalKey(action)), { at: at.toISOString(), action: summary });
  }

  /** Nothing was written after all (the provider refused): no earlier attempt to find. */
  async unintend(action: AuthorizedAction): Promise<void> {
    await fs.rm(await this.pendingPath(journalKey(action)), { force: true });
  }

  /** An earlier attempt of this very action started writing and was never journalled. */
  async intended(action: AuthorizedAction): Promise<boolean> {
    return (await readJsonOrNull(await this.pendingPath(journalKey(action)))) !== null;
  }

  private async pendingPath(key: string): Promise<string> {
    return await datumPath(this.root, path.join('pending', `${key}.json`));
  }

  /** The marker Datum's own last write to `resourceKey` left (any generation), or null. */
  async lastWritten(resourceKey: string): Promise<OwnWrite | null> {
    return (await this.readFence()).written?.[resourceKey] ?? null;
  }

  private async readFence(): Promise<FenceFile> {
    const file = await datumPath(this.root, 'fence.json');
    const data = (await readJsonOrNull(file)) as FenceFile | null;
    return data && typeof data === 'object' && data.resources ? data : { resources: {} };
  }

  private async entryPath(key: string): Promise<string> {
    return await datumPath(this.root, path.join('journal', `${key}.json`));
  }
}

const locks = new Map<string, Promise<unknown>>();

/**
 * Runs `fn` after every earlier call for the same key has finished. Applies on one node are
 * serialised so that fence check, action and fence update are one step (handover between two
 * generations' workflows may send actions concurrently). Shared by every activities instance of
 * this process; one node has one agent process.
 */
export async function withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const before = locks.get(key) ?? Promise.resolve();
  const run = before.then(fn, fn);
  const settled = run.then(
    () => undefined,
    () => undefined,
  );
  locks.set(key, settled);
  try {
    return await run;
  } finally {
    if (locks.get(key) === settled) locks.delete(key);
  }
}
