import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { withFix } from '../../contract';
import {
  LedgerConfigError,
  LedgerUnavailable,
  SCHEMA_VERSION,
  assertSameEntry,
  checkSchemaVersion,
  closedError,
  listSql,
  prepareEntry,
  prepareList,
  NODE_SUMMARY_SQL,
  readEntry,
  keptForm,
  readKept,
  type LedgerStore,
  type ListOptions,
  type NodeSummary,
  type PreparedEntry,
} from './common';
import { EMPTY_RECORD, LEGACY_SQL, decisionsOf, foldInto, legacyRecord, readRecord, type DecisionRecord } from './decisions';

/*
 * The default ledger: one SQLite file that several processes (controller workers, the CLI) open
 * at once. WAL lets readers run beside the one writer; busy_timeout makes a writer wait for
 * another process's short append instead of failing. better-sqlite3 is synchronous, so a wait
 * blocks this process's event loop; appends are single-row and the wait is bounded.
 */

const BUSY_TIMEOUT_MS = 15_000;

/**
 * Migrations by version; each runs once, in one transaction, and records its version. `then`
 * fills what a statement cannot (version 2 starts each node's record from the older release's
 * answer, ledger-store/decisions.ts legacyRecord).
 */
const MIGRATIONS: ReadonlyArray<{ version: number; statements: string[]; then?: (db: Database.Database) => void }> = [
  {
    version: 1,
    statements: [
      `CREATE TABLE IF NOT EXISTS ledger_entries (
         id INTEGER PRIMARY KEY,
         node_id TEXT NOT NULL,
         workflow_id TEXT NOT NULL,
         chain_id TEXT NOT NULL,
         seq INTEGER NOT NULL,
         decided_at TEXT NOT NULL,
         desired_generation INTEGER NOT NULL,
         convergence_status TEXT NOT NULL,
         reason TEXT NOT NULL,
         ledger_version INTEGER NOT NULL,
         entry TEXT NOT NULL CHECK (json_valid(entry)),
         recorded_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
         CONSTRAINT ledger_entries_once UNIQUE (workflow_id, chain_id, seq)
       )`,
      'CREATE INDEX IF NOT EXISTS ledger_entries_node_decided ON ledger_entries (node_id, decided_at, seq)',
      // Append-only in the file itself, not only in this code: a decision, once recorded, stays.
      `CREATE TRIGGER IF NOT EXISTS ledger_entries_no_update BEFORE UPDATE ON ledger_entries
       BEGIN SELECT RAISE(ABORT, 'the Datum ledger is append-only: UPDATE on ledger_entries is not allowed'); END`,
      `CREATE TRIGGER IF NOT EXISTS ledger_entries_no_delete BEFORE DELETE ON ledger_entries
       BEGIN SELECT RAISE(ABORT, 'the Datum ledger is append-only: DELETE on ledger_entries is not allowed'); END`,
    ],
  },
  {
    version: 2,
    statements: [
      // The store's copy of each node's operator decisions: state derived from the entries, so
      // it is rewritten (not appended to), always in the same transaction as the entry it follows.
      `CREATE TABLE IF NOT EXISTS node_operator_decisions (
         node_id TEXT PRIMARY KEY,
         generation INTEGER,
         decisions TEXT NOT NULL CHECK (json_valid(decisions)),
         updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
       )`,
    ],
    then: (db) => {
      const rows = db.prepare<[], { node_id: string; generation: number; entry: string | null }>(LEGACY_SQL).all();
      const put = db.prepare(SAVE_RECORD_SQL);
      for (const r of rows) {
        const record = legacyRecord(r.entry === null ? null : JSON.parse(r.entry), Number(r.generation));
        put.run(r.node_id, record.generation, JSON.stringify(record.targets));
      }
    },
  },
  {
    version: 3,
    statements: [
      // Bound intents, kept once by (node, generation, digest): the content a rollback writes back.
      `CREATE TABLE IF NOT EXISTS bound_intents (
         node_id TEXT NOT NULL,
         generation INTEGER NOT NULL,
         digest TEXT NOT NULL,
         intent TEXT NOT NULL CHECK (json_valid(intent)),
         kept_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
         PRIMARY KEY (node_id, generation, digest)
       )`,
    ],
  },
];

const SAVE_RECORD_SQL = `INSERT INTO node_operator_decisions (node_id, generation, decisions) VALUES (?, ?, ?)
   ON CONFLICT (node_id) DO UPDATE SET generation = excluded.generation, decisions = excluded.decisions,
     updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`;

// The store's methods are written inline in the object this factory returns (they share its
// connection and statements); each is short, and ESLint counts them all as the factory's lines.
// eslint-disable-next-line max-lines-per-function
export function openSqliteLedger(file: string): LedgerStore {
  const location = file === ':memory:' ? file : path.resolve(file);
  let db: Database.Database;
  try {
    if (location !== ':memory:') mkdirSync(path.dirname(location), { recursive: true });
    db = new Database(location, { timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw unavailable(location, error);
  }
  try {
    db.pragma('journal_mode = WAL');
    // FULL: a committed decision survives a power cut, not only a crash of this process.
    db.pragma('synchronous = FULL');
    migrate(db, location);
  } catch (error) {
    db.close();
    throw error instanceof LedgerConfigError ? error : unavailable(location, error);
  }

  const insert = db.prepare<[string, string, string, number, string, number, string, string, number, string]>(
    `INSERT INTO ledger_entries
       (node_id, workflow_id, chain_id, seq, decided_at, desired_generation, convergence_status, reason, ledger_version, entry)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (workflow_id, chain_id, seq) DO NOTHING`,
  );
  const existing = db.prepare<[string, string, number], { entry: string }>(
    'SELECT entry FROM ledger_entries WHERE workflow_id = ? AND chain_id = ? AND seq = ?',
  );
  const summary = db.prepare<[], { node: string; entries: number; last_decided_at: string; last_status: string }>(
    NODE_SUMMARY_SQL,
  );
  const loadRecord = db.prepare<[string], { generation: number | null; decisions: string }>(
    'SELECT generation, decisions FROM node_operator_decisions WHERE node_id = ?',
  );
  const saveRecord = db.prepare<[string, number | null, string]>(SAVE_RECORD_SQL);
  const keep = db.prepare<[string, number, string, string]>(
    'INSERT INTO bound_intents (node_id, generation, digest, intent) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING',
  );
  const kept = db.prepare<[string, number, string], { intent: string }>(
    'SELECT intent FROM bound_intents WHERE node_id = ? AND generation = ? AND digest = ?',
  );
  const recordOf = (node: string): DecisionRecord => {
    const row = loadRecord.get(node);
    return row ? readRecord(node, JSON.parse(row.decisions), row.generation) : EMPTY_RECORD;
  };
  const appendTransaction = db.transaction((p: PreparedEntry): 'appended' | 'duplicate' => {
    const { changes } = insert.run(
      p.node_id,
      p.workflow_id,
      p.chain_id,
      p.seq,
      p.decided_at,
      p.desired_generation,
      p.convergence_status,
      p.reason,
      p.ledger_version,
      p.json,
    );
    if (changes === 1) {
      const next = foldInto(p, () => recordOf(p.node_id), location);
      if (next) saveRecord.run(p.node_id, next.generation, JSON.stringify(next.targets));
      return 'appended';
    }
    const row = existing.get(p.workflow_id, p.chain_id, p.seq);
    assertSameEntry(row ? JSON.parse(row.entry) : null, p);
    return 'duplicate';
  });
  // IMMEDIATE: the write lock from the start, so two processes appending for one node fold
  // their entries one after the other, each on the record the other left.
  const appendOnce = (p: PreparedEntry) => appendTransaction.immediate(p);
  let closed = false;
  const open = () => {
    if (closed) throw closedError(location);
    return db;
  };

  return {
    backend: 'sqlite',
    location,
    append: (entry, chainId) =>
      settle(() => {
        const p = prepareEntry(entry, chainId);
        open();
        return appendOnce(p);
      }),
    list: (node, options?: ListOptions) =>
      settle(() => {
        const { sql, params } = listSql(prepareList(node, options), () => '?');
        const rows = open()
          .prepare<Array<string | number>, { entry: string }>(sql)
          .all(...params);
        return rows.map((r) => readEntry(JSON.parse(r.entry)));
      }),
    operatorDecisions: (node) =>
      settle(() => {
        const { node: name } = prepareList(node, undefined);
        open();
        return decisionsOf(recordOf(name));
      }),
    keepIntent: (intent) =>
      settle(() => {
        const k = keptForm(intent);
        open();
        keep.run(k.node, k.generation, k.digest, k.json);
      }),
    keptIntent: (node, generation, digest) =>
      settle(() => {
        open();
        const row = kept.get(node, generation, digest);
        return row ? readKept(row.intent, node, generation, digest) : null;
      }),
    nodes: () =>
      settle((): NodeSummary[] => {
        open();
        return summary.all().map((r) => ({ ...r, entries: Number(r.entries) }));
      }),
    close: () =>
      settle(() => {
        if (closed) return;
        closed = true;
        db.close();
      }),
  };

  /**
   * Runs synchronous store code as a promise, so a throw becomes a rejection as on PostgreSQL.
   * SQLite's own errors here are about the file, never the entry (busy past the timeout, disk
   * full, read-only): LedgerUnavailable, which an activity retry may outlast.
   */
  function settle<T>(work: () => T): Promise<T> {
    return new Promise((resolve) => {
      try {
        resolve(work());
      } catch (error) {
        throw error instanceof Database.SqliteError ? unavailable(location, error, 'use') : error;
      }
    });
  }
}

function currentVersion(db: Database.Database): number {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_schema_versions'").get();
  if (!table) return 0;
  const row = db.prepare<[], { v: number | null }>('SELECT MAX(version) AS v FROM ledger_schema_versions').get();
  return row?.v ?? 0;
}

function migrate(db: Database.Database, location: string): void {
  // The common case (schema current) reads only; the write lock is taken only to migrate.
  if (checkSchemaVersion(currentVersion(db), location) === SCHEMA_VERSION) return;
  db.transaction(() => {
    // Re-read under the write lock: another process may have migrated meanwhile.
    const from = checkSchemaVersion(currentVersion(db), location);
    db.exec(
      "CREATE TABLE IF NOT EXISTS ledger_schema_versions (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))",
    );
    for (const m of MIGRATIONS) {
      if (m.version <= from) continue;
      for (const statement of m.statements) db.exec(statement);
      m.then?.(db);
      db.prepare('INSERT INTO ledger_schema_versions (version) VALUES (?)').run(m.version);
    }
  }).immediate();
}

function unavailable(location: string, error: unknown, doing: 'open' | 'use' = 'open'): LedgerUnavailable {
  const detail = error instanceof Error ? error.message : String(error);
  return new LedgerUnavailable(
    withFix(
      `cannot ${doing} the SQLite ledger at ${location}: ${detail}`,
      'make sure the directory is writable, the disk has room and the file is a ' +
        `Datum ledger that no process keeps locked for more than ${BUSY_TIMEOUT_MS / 1000} s, or set DATUM_LEDGER_URL to another location`,
    ),
    { cause: error },
  );
}
