import { z } from 'zod';
import { isNodeId, withFix } from '../../contract';
import {
  canonicalJson,
  decisionFingerprint,
  desiredDigest,
  problemLine,
  type BoundIntent,
  type LedgerEntry,
  type OperatorDecision,
  type Problem,
} from '../../domain';
import { ledgerEntry, problemsFromZod } from '../../schemas';

/*
 * What both ledger back ends share: the public types, the typed errors (their names are the
 * Temporal failure types an activity surfaces), and the checks made before anything is written
 * or queried, so SQLite and PostgreSQL refuse exactly the same inputs with the same words.
 */

export interface ListOptions {
  /** Only entries decided at or after this ISO 8601 time (inclusive). */
  since?: string;
  /** At most this many entries: the earliest ones in (decided_at, seq) order, or the latest with `newest`. */
  limit?: number;
  workflowId?: string;
  /** With `limit`: the latest entries instead of the earliest (still returned oldest first). */
  newest?: boolean;
}

export interface NodeSummary {
  node: string;
  entries: number;
  /** decided_at of the node's latest entry, as UTC ISO 8601 with milliseconds. */
  last_decided_at: string;
  last_status: string;
}

export interface LedgerStore {
  /**
   * Records one decision. Idempotent on (workflow_id, chainId, seq): a retried append of the same
   * entry returns 'duplicate' and writes nothing; a different entry under the same key is a
   * LedgerSeqConflict, never a silent drop.
   */
  append(entry: LedgerEntry, chainId: string): Promise<'appended' | 'duplicate'>;
  /** One node's entries in (decided_at, seq) order. */
  list(node: string, options?: ListOptions): Promise<LedgerEntry[]>;
  /** Every node with entries, by node name. */
  nodes(): Promise<NodeSummary[]>;
  /**
   * The store's copy of the node's operator decisions (yields, open conflicts), by target: kept
   * beside the entries, in each append's transaction, by the agent's own rules
   * (ledger-store/decisions.ts). Empty for a node the store knows nothing about.
   */
  operatorDecisions(node: string): Promise<OperatorDecision[]>;
  /**
   * Keeps a bound intent (its node, generation, digest, labels, resources and policy) once: what
   * a rollback writes back (docs/operations.md, "A first production change, in waves").
   * Idempotent by (node, generation, digest).
   */
  keepIntent(intent: BoundIntent): Promise<void>;
  /** The intent kept for (node, generation, digest), checked against its digest; null when none was kept. */
  keptIntent(node: string, generation: number, digest: string): Promise<BoundIntent | null>;
  close(): Promise<void>;
  readonly backend: 'sqlite' | 'postgres';
  /** Where the ledger lives, safe to print: a file path, or the URL without its password. */
  readonly location: string;
}

/** The schema this code writes. Stored in `ledger_schema_versions`, one row per applied migration. */
export const SCHEMA_VERSION = 3;

/**
 * A bound intent as the store keeps it: everything that makes its content and digest, without
 * the controller's own artifact locations (another controller resolves its own).
 */
export function keptForm(intent: BoundIntent): { node: string; generation: number; digest: string; json: string } {
  if (!isNodeId(intent.node) || !Number.isSafeInteger(intent.generation) || !/^sha256:[0-9a-f]{64}$/.test(intent.digest))
    throw new InvalidLedgerQuery(withFix('a kept intent needs a node, a generation and a digest', 'keep a bound intent'));
  const { locations: _locations, ...kept } = intent;
  return { node: intent.node, generation: intent.generation, digest: intent.digest, json: JSON.stringify(kept) };
}

/** A kept intent read back: the one kept for that key only if its content still makes its digest. */
export function readKept(json: unknown, node: string, generation: number, digest: string): BoundIntent | null {
  const intent = (typeof json === 'string' ? JSON.parse(json) : json) as BoundIntent | null;
  if (!intent || intent.node !== node || intent.generation !== generation || intent.digest !== digest) return null;
  return desiredDigest(intent.resources, intent.policy) === digest ? intent : null;
}

/** An entry the ledger will not record; names every bad field. Retrying cannot help. */
export class InvalidLedgerEntry extends Error {
  override readonly name = 'InvalidLedgerEntry';
  constructor(
    readonly what: string,
    readonly problems: Problem[],
    verdict = 'not recorded in the ledger',
  ) {
    super(`${what}: ${verdict}:\n${problems.map(problemLine).join('\n')}`);
  }
}

/** A list/nodes call with an unusable argument (since, limit, node). */
export class InvalidLedgerQuery extends Error {
  override readonly name = 'InvalidLedgerQuery';
}

/**
 * The key (workflow_id, chain_id, seq) is already taken by a different entry. A retry carries
 * the same entry, so this means two writers disagree about one decision: keeping either silently
 * would falsify the record. Retrying cannot help.
 */
export class LedgerSeqConflict extends Error {
  override readonly name = 'LedgerSeqConflict';
}

/** The ledger cannot be reached or opened right now (server down, file unwritable). */
export class LedgerUnavailable extends Error {
  override readonly name = 'LedgerUnavailable';
}

/** The ledger's configuration is wrong: an unknown URL scheme, or a schema newer than this code. */
export class LedgerConfigError extends Error {
  override readonly name = 'LedgerConfigError';
}

/** What a store needs to write one entry: the validated entry and its indexed columns. */
export interface PreparedEntry {
  entry: LedgerEntry;
  node_id: string;
  workflow_id: string;
  chain_id: string;
  seq: number;
  /** Normalized to `Date#toISOString()` so the text sorts as time in SQLite. */
  decided_at: string;
  desired_generation: number;
  convergence_status: string;
  reason: string;
  ledger_version: number;
  json: string;
}

const isoInstant = z.iso.datetime({ offset: true });
const isoDate = z.iso.date();

/** `text` as UTC ISO 8601 with milliseconds, or null when it is not an ISO time with a zone. */
export function normalizeInstant(text: string): string | null {
  if (!isoInstant.safeParse(text).success) return null;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : null;
}

const MAX_CHAIN_ID = 256;

export function prepareEntry(input: unknown, chainId: unknown): PreparedEntry {
  const parsed = ledgerEntry.safeParse(input);
  const problems: Problem[] = parsed.success ? [] : problemsFromZod(parsed.error);
  let decidedAt: string | null = null;
  if (parsed.success) {
    decidedAt = normalizeInstant(parsed.data.decided_at);
    // The schema only says "string"; the store orders and filters by it, so it must be a time.
    if (decidedAt === null) {
      problems.push({
        field: 'decided_at',
        problem: `"${parsed.data.decided_at}" is not an ISO 8601 time with a zone`,
        fix: 'record when the decision was made as UTC ISO 8601, such as 2026-11-29T12:00:00.000Z',
      });
    }
  }
  if (typeof chainId !== 'string' || chainId.length === 0 || chainId.length > MAX_CHAIN_ID) {
    problems.push({
      field: 'chainId',
      problem: typeof chainId === 'string' ? `must be 1 to ${MAX_CHAIN_ID} characters (got ${chainId.length})` : 'is missing',
      fix: "pass the id of the workflow's run chain (its first execution's run id)",
    });
  }
  if (!parsed.success || decidedAt === null || problems.length > 0) throw new InvalidLedgerEntry(describeEntry(input), problems);
  const entry = parsed.data;
  return {
    entry,
    node_id: entry.node_id,
    workflow_id: entry.workflow_id,
    chain_id: chainId as string,
    seq: entry.seq,
    decided_at: decidedAt,
    desired_generation: entry.desired_generation,
    convergence_status: entry.convergence_status,
    reason: entry.reason,
    ledger_version: entry.ledger_version,
    json: JSON.stringify(entry),
  };
}

/**
 * A stored entry as list() returns it: validated again, which also gives both back ends the
 * schema's key order (jsonb keeps its own) and refuses a row some other tool inserted.
 */
export function readEntry(stored: unknown): LedgerEntry {
  const parsed = ledgerEntry.safeParse(stored);
  if (parsed.success) return parsed.data;
  throw new InvalidLedgerEntry(
    `stored ${describeEntry(stored)}`,
    problemsFromZod(parsed.error),
    'in the ledger but not a valid v1 entry (written by another tool or a newer Datum?)',
  );
}

/** "ledger entry seq 3 of workflow X (node N-24)", from whatever of that the input has. */
function describeEntry(input: unknown): string {
  if (input === null || typeof input !== 'object') return `ledger entry (${input === null ? 'null' : typeof input})`;
  const e = input as Record<string, unknown>;
  const parts = ['ledger entry'];
  if (typeof e.seq === 'number') parts.push(`seq ${e.seq}`);
  if (typeof e.workflow_id === 'string') parts.push(`of workflow ${e.workflow_id}`);
  if (typeof e.node_id === 'string') parts.push(`(node ${e.node_id})`);
  return parts.join(' ');
}

export interface ListQuery {
  node: string;
  /** Normalized UTC ISO, or null for no lower bound. */
  since: string | null;
  limit: number | null;
  workflowId: string | null;
  newest: boolean;
}

export function prepareList(node: unknown, options: ListOptions | undefined): ListQuery {
  if (typeof node !== 'string' || node.length === 0) {
    throw new InvalidLedgerQuery(withFix('node must be a node name such as "N-24"', "say which node's ledger to list"));
  }
  const o = options ?? {};
  let since: string | null = null;
  if (o.since !== undefined) {
    // A bare date means its first instant in UTC: `--since 2026-11-29` is what people type.
    since =
      typeof o.since !== 'string'
        ? null
        : isoDate.safeParse(o.since).success
          ? `${o.since}T00:00:00.000Z`
          : normalizeInstant(o.since);
    if (since === null) {
      throw new InvalidLedgerQuery(
        withFix(
          `since ${JSON.stringify(o.since)} is not an ISO 8601 time with a zone`,
          'write a UTC time such as 2026-11-29T12:00:00Z, one with an offset such as 2026-11-29T13:00:00+01:00, or a date such as 2026-11-29',
        ),
      );
    }
  }
  const limit = o.limit ?? null;
  if (limit !== null && !(Number.isSafeInteger(limit) && limit >= 1)) {
    throw new InvalidLedgerQuery(
      withFix(`limit ${JSON.stringify(limit)} is not a positive whole number`, 'give how many entries to return, such as 50'),
    );
  }
  if (o.workflowId !== undefined && typeof o.workflowId !== 'string') {
    throw new InvalidLedgerQuery(withFix('workflowId must be a string', 'pass the reconcile workflow id, or leave it out'));
  }
  return { node, since, limit, workflowId: o.workflowId ?? null, newest: o.newest === true };
}

/**
 * The SELECT for one list call, oldest first, with the back end's placeholders: `?` for SQLite,
 * `$n` (and a cast for the time bound) for PostgreSQL. The parameters follow the placeholders.
 */
export function listSql(
  q: ListQuery,
  placeholder: (n: number, cast?: 'timestamptz') => string,
): { sql: string; params: Array<string | number> } {
  const params: Array<string | number> = [q.node];
  const where = [`node_id = ${placeholder(params.length)}`];
  if (q.since !== null) {
    params.push(q.since);
    where.push(`decided_at >= ${placeholder(params.length, 'timestamptz')}`);
  }
  if (q.workflowId !== null) {
    params.push(q.workflowId);
    where.push(`workflow_id = ${placeholder(params.length)}`);
  }
  const order = 'ORDER BY decided_at, seq, id';
  if (q.limit === null) return { sql: `SELECT entry FROM ledger_entries WHERE ${where.join(' AND ')} ${order}`, params };
  params.push(q.limit);
  const limit = `LIMIT ${placeholder(params.length)}`;
  if (!q.newest) return { sql: `SELECT entry FROM ledger_entries WHERE ${where.join(' AND ')} ${order} ${limit}`, params };
  // The latest N, by the index's order backwards, then oldest first like every list.
  const latest = `SELECT entry, decided_at, seq, id FROM ledger_entries WHERE ${where.join(' AND ')} ORDER BY decided_at DESC, seq DESC, id DESC ${limit}`;
  return { sql: `SELECT entry FROM (${latest}) latest ${order}`, params };
}

/** Every node's entry count and last decision, in the SQL both back ends understand. */
export const NODE_SUMMARY_SQL = `SELECT c.node_id AS node, c.entries AS entries, l.decided_at AS last_decided_at, l.convergence_status AS last_status
     FROM (SELECT node_id, COUNT(*) AS entries FROM ledger_entries GROUP BY node_id) c
     JOIN (SELECT node_id, decided_at, convergence_status,
                  ROW_NUMBER() OVER (PARTITION BY node_id ORDER BY decided_at DESC, seq DESC, id DESC) AS rn
             FROM ledger_entries) l
       ON l.node_id = c.node_id AND l.rn = 1
    ORDER BY c.node_id`;

/** `version`, unless the ledger's schema is newer than this code: then LedgerConfigError. */
export function checkSchemaVersion(version: number, location: string): number {
  if (version > SCHEMA_VERSION) {
    throw new LedgerConfigError(
      withFix(
        `the ledger at ${location} has schema version ${version}, newer than this Datum understands (${SCHEMA_VERSION})`,
        'upgrade Datum on this machine, or point DATUM_LEDGER_URL at another ledger',
      ),
    );
  }
  return version;
}

/**
 * Throws LedgerSeqConflict unless `stored` is the same entry as `entry`: the same bytes, or the
 * same decision decided again. A workflow task whose worker died after the append but before the
 * task completed runs again on a later workflow clock, and decides the same thing from the same
 * history with other times (decided_at, not_before, ages in the detail). The first record stands;
 * the retry is a duplicate. A decision that differs in what it says is still a conflict.
 */
export function assertSameEntry(stored: unknown, prepared: PreparedEntry): void {
  if (canonicalJson(stored) === canonicalJson(prepared.entry)) return;
  if (sameDecision(stored, prepared.entry)) return;
  const s = (stored ?? {}) as Partial<LedgerEntry>;
  throw new LedgerSeqConflict(
    withFix(
      `ledger already holds a different entry for workflow ${prepared.workflow_id} chain ${prepared.chain_id} seq ${prepared.seq} ` +
        `(stored: ${String(s.convergence_status)}/${String(s.reason)} decided at ${String(s.decided_at)}; ` +
        `new: ${prepared.convergence_status}/${prepared.reason} decided at ${prepared.entry.decided_at})`,
      "a run chain must number its decisions once; check that only one workflow run writes this chain and that chainId is the chain's first run id",
    ),
  );
}

export function closedError(location: string): LedgerUnavailable {
  return new LedgerUnavailable(withFix(`the ledger store at ${location} is closed`, 'open a new store with openLedgerStore()'));
}

/** The same decision, whatever the clock said: its fingerprint, its actions and its evidence. */
function sameDecision(stored: unknown, entry: LedgerEntry): boolean {
  const parsed = ledgerEntry.safeParse(stored);
  if (!parsed.success) return false;
  const s = parsed.data;
  const acts = (e: LedgerEntry) =>
    canonicalJson(e.authorized_actions.map((a) => [a.resource_key, a.action, a.idempotency_key, a.action_seq]));
  const evidence = (e: LedgerEntry) =>
    canonicalJson(e.execution_evidence.map((x) => [x.resource_key, x.action, x.idempotency_key, x.outcome]));
  return (
    s.workflow_id === entry.workflow_id &&
    s.seq === entry.seq &&
    decisionFingerprint(s) === decisionFingerprint(entry) &&
    acts(s) === acts(entry) &&
    evidence(s) === evidence(entry)
  );
}
