import { Pool, type PoolClient } from 'pg';
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
  type NodeSummary,
} from './common';
import { EMPTY_RECORD, LEGACY_SQL, decisionsOf, foldInto, legacyRecord, readRecord, type DecisionRecord } from './decisions';

/*
 * The fleet-wide ledger on PostgreSQL (DATUM_LEDGER_URL=postgres://…). Every controller worker
 * holds a small pool; the unique key and ON CONFLICT DO NOTHING make concurrent and retried
 * appends of one entry land once. Schema changes run under an advisory lock so workers that
 * start together do not race each other's CREATE TABLE.
 */

const POOL_MAX = 5;
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Migrations by version, run under the schema lock in one transaction. `then` fills what a
 * statement cannot (version 2 starts each node's record from the older release's answer,
 * ledger-store/decisions.ts legacyRecord).
 */
const MIGRATIONS: ReadonlyArray<{ version: number; statements: string[]; then?: (client: PoolClient) => Promise<void> }> = [
  {
    version: 1,
    statements: [
      `CREATE TABLE IF NOT EXISTS ledger_entries (
         id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
         node_id text NOT NULL,
         workflow_id text NOT NULL,
         chain_id text NOT NULL,
         seq bigint NOT NULL,
         decided_at timestamptz NOT NULL,
         desired_generation bigint NOT NULL,
         convergence_status text NOT NULL,
         reason text NOT NULL,
         ledger_version integer NOT NULL,
         entry jsonb NOT NULL,
         recorded_at timestamptz NOT NULL DEFAULT now(),
         CONSTRAINT ledger_entries_once UNIQUE (workflow_id, chain_id, seq)
       )`,
      'CREATE INDEX IF NOT EXISTS ledger_entries_node_decided ON ledger_entries (node_id, decided_at, seq)',
      // Append-only in the database itself, not only in this code: a decision, once recorded, stays.
      `CREATE OR REPLACE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION 'the Datum ledger is append-only: % on ledger_entries is not allowed', TG_OP;
       END $$`,
      'DROP TRIGGER IF EXISTS ledger_entries_append_only ON ledger_entries',
      `CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON ledger_entries
       FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_append_only()`,
    ],
  },
  {
    version: 2,
    statements: [
      // The store's copy of each node's operator decisions: state derived from the entries, so
      // it is rewritten (not appended to), always in the same transaction as the entry it follows.
      `CREATE TABLE IF NOT EXISTS node_operator_decisions (
         node_id text PRIMARY KEY,
         generation bigint,
         decisions jsonb NOT NULL,
         updated_at timestamptz NOT NULL DEFAULT now()
       )`,
    ],
    then: async (client) => {
      const rows = await client.query<{ node_id: string; generation: string; entry: unknown }>(LEGACY_SQL);
      for (const r of rows.rows) {
        const record = legacyRecord(r.entry, Number(r.generation));
        await client.query(SAVE_RECORD_SQL, [r.node_id, record.generation, JSON.stringify(record.targets)]);
      }
    },
  },
  {
    version: 3,
    statements: [
      // Bound intents, kept once by (node, generation, digest): the content a rollback writes back.
      `CREATE TABLE IF NOT EXISTS bound_intents (
         node_id text NOT NULL,
         generation bigint NOT NULL,
         digest text NOT NULL,
         intent jsonb NOT NULL,
         kept_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (node_id, generation, digest)
       )`,
    ],
  },
];

const SAVE_RECORD_SQL = `INSERT INTO node_operator_decisions (node_id, generation, decisions) VALUES ($1, $2, $3::jsonb)
   ON CONFLICT (node_id) DO UPDATE SET generation = excluded.generation, decisions = excluded.decisions, updated_at = now()`;

/**
 * The node's record, locked until the append's transaction ends: appends for one node from
 * several workers fold one after the other, each on the record the one before left. The first
 * append for a node creates the row to lock.
 */
async function lockedRecord(client: PoolClient, node: string): Promise<() => DecisionRecord> {
  await client.query(
    `INSERT INTO node_operator_decisions (node_id, generation, decisions) VALUES ($1, NULL, '{}'::jsonb)
     ON CONFLICT (node_id) DO NOTHING`,
    [node],
  );
  const row = await client.query<{ generation: string | null; decisions: unknown }>(
    'SELECT generation, decisions FROM node_operator_decisions WHERE node_id = $1 FOR UPDATE',
    [node],
  );
  const r = row.rows[0];
  // Read when folded, so a row that does not read is reported there (foldInto) and not here.
  return () => (r ? readRecord(node, r.decisions, r.generation) : EMPTY_RECORD);
}

/** The URL without its password (in the authority or as a `password=` parameter): safe to print. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.password = '';
    if (u.searchParams.has('password')) u.searchParams.set('password', '***');
    return u.toString();
  } catch {
    return url.replace(/\/\/([^/@:]*):[^/@]*@/, '//$1@').replace(/([?&]password=)[^&]*/gi, '$1***');
  }
}

// The store's methods are written inline in the object this factory returns (they share its
// connection and statements); each is short, and ESLint counts them all as the factory's lines.
// eslint-disable-next-line max-lines-per-function
export async function openPostgresLedger(url: string): Promise<LedgerStore> {
  const location = redactUrl(url);
  try {
    new URL(url);
  } catch {
    // Not `cause`: the URL parser's error carries the whole input, password included.
    throw new LedgerConfigError(
      withFix(`DATUM_LEDGER_URL ${location} is not a valid URL`, 'write it as postgres://user:password@host:5432/database'),
    );
  }
  const pool = new Pool({
    connectionString: url,
    max: POOL_MAX,
    // pg's default is to wait forever for a server that never answers.
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    // A CLI that forgets close() must still exit.
    allowExitOnIdle: true,
    application_name: 'datum-ledger',
  });
  // An idle pooled connection that dies (server restart) is dropped and replaced on next use;
  // without a listener the 'error' event would crash the process.
  pool.on('error', (error) => {
    console.warn(`ledger: an idle connection to ${location} failed (${describe(error)}); the next query opens a new one`);
  });

  try {
    await migrate(pool, location);
  } catch (error) {
    await pool.end().catch(() => undefined); // the migration's error is the one to report
    throw error instanceof LedgerConfigError ? error : translate(error, location);
  }

  let closed = false;
  const query = async <R extends object>(sql: string, params: unknown[]) => {
    if (closed) throw closedError(location);
    try {
      return await pool.query<R>(sql, params);
    } catch (error) {
      throw translate(error, location);
    }
  };

  /** `work` in one transaction on one pooled connection; errors roll it back. */
  const transaction = async <T>(work: (client: PoolClient) => Promise<T>): Promise<T> => {
    if (closed) throw closedError(location);
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw translate(error, location);
    }
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      client.release();
      return result;
    } catch (error) {
      const rolledBack = await client.query('ROLLBACK').then(
        () => true,
        () => false,
      );
      // A connection that cannot even roll back is closed, not handed to the next query.
      client.release(!rolledBack);
      throw translate(error, location);
    }
  };

  return {
    backend: 'postgres',
    location,
    async append(entry, chainId) {
      const p = prepareEntry(entry, chainId);
      return await transaction(async (client) => {
        const inserted = await client.query(
          `INSERT INTO ledger_entries
           (node_id, workflow_id, chain_id, seq, decided_at, desired_generation, convergence_status, reason, ledger_version, entry)
           VALUES ($1, $2, $3, $4, $5::timestamptz, $6, $7, $8, $9, $10::jsonb)
           ON CONFLICT ON CONSTRAINT ledger_entries_once DO NOTHING`,
          [
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
          ],
        );
        if (inserted.rowCount === 1) {
          const next = foldInto(p, await lockedRecord(client, p.node_id), location);
          if (next) await client.query(SAVE_RECORD_SQL, [p.node_id, next.generation, JSON.stringify(next.targets)]);
          return 'appended' as const;
        }
        const existing = await client.query<{ entry: unknown }>(
          'SELECT entry FROM ledger_entries WHERE workflow_id = $1 AND chain_id = $2 AND seq = $3',
          [p.workflow_id, p.chain_id, p.seq],
        );
        assertSameEntry(existing.rows[0]?.entry ?? null, p);
        return 'duplicate' as const;
      });
    },
    async operatorDecisions(node) {
      const { node: name } = prepareList(node, undefined);
      const result = await query<{ generation: string | null; decisions: unknown }>(
        'SELECT generation, decisions FROM node_operator_decisions WHERE node_id = $1',
        [name],
      );
      const r = result.rows[0];
      return decisionsOf(r ? readRecord(name, r.decisions, r.generation) : EMPTY_RECORD);
    },
    async keepIntent(intent) {
      const k = keptForm(intent);
      await query(
        'INSERT INTO bound_intents (node_id, generation, digest, intent) VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT DO NOTHING',
        [k.node, k.generation, k.digest, k.json],
      );
    },
    async keptIntent(node, generation, digest) {
      const result = await query<{ intent: unknown }>(
        'SELECT intent FROM bound_intents WHERE node_id = $1 AND generation = $2 AND digest = $3',
        [node, generation, digest],
      );
      const row = result.rows[0];
      return row ? readKept(row.intent, node, generation, digest) : null;
    },
    async list(node, options) {
      const { sql, params } = listSql(prepareList(node, options), (n, cast) => (cast ? `$${n}::${cast}` : `$${n}`));
      const result = await query<{ entry: unknown }>(sql, params);
      return result.rows.map((r) => readEntry(r.entry));
    },
    async nodes(): Promise<NodeSummary[]> {
      const result = await query<{ node: string; entries: string; last_decided_at: Date; last_status: string }>(
        NODE_SUMMARY_SQL,
        [],
      );
      return result.rows.map((r) => ({
        node: r.node,
        entries: Number(r.entries),
        last_decided_at: r.last_decided_at.toISOString(),
        last_status: r.last_status,
      }));
    },
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}

async function readVersion(client: PoolClient, location: string): Promise<number> {
  // A catalog scan, not to_regclass(): that reads the relation cache, which can still say "no
  // such table" after another worker's migration committed while this one waited for the lock.
  const table = await client.query(
    `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relname = 'ledger_schema_versions' AND n.nspname = current_schema()`,
  );
  if (table.rowCount === 0) return 0;
  const row = await client.query<{ v: number | null }>('SELECT MAX(version) AS v FROM ledger_schema_versions');
  return checkSchemaVersion(row.rows[0]?.v ?? 0, location);
}

async function migrate(pool: Pool, location: string): Promise<void> {
  const client = await pool.connect();
  try {
    // The common case (schema current) only reads; the lock is taken only to migrate.
    if ((await readVersion(client, location)) === SCHEMA_VERSION) return;
    await client.query('BEGIN');
    try {
      await client.query("SELECT pg_advisory_xact_lock(hashtext('datum ledger schema'))");
      // Re-read under the lock: another worker may have migrated meanwhile.
      const from = await readVersion(client, location);
      await client.query(
        'CREATE TABLE IF NOT EXISTS ledger_schema_versions (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      for (const m of MIGRATIONS) {
        if (m.version <= from) continue;
        for (const statement of m.statements) await client.query(statement);
        await m.then?.(client);
        await client.query('INSERT INTO ledger_schema_versions (version) VALUES ($1)', [m.version]);
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined); // the statement's error is the one to report
      throw error;
    }
  } finally {
    client.release();
  }
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down, recovering)
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

/** Connection-level failures become LedgerUnavailable with a fix; anything else passes through. */
function translate(error: unknown, location: string): unknown {
  const code = (error as { code?: unknown }).code;
  const detail = describe(error);
  if (
    (typeof code === 'string' && UNREACHABLE_CODES.has(code)) ||
    /timeout exceeded when trying to connect|Connection terminated/i.test(detail)
  ) {
    return new LedgerUnavailable(
      withFix(
        `cannot reach the PostgreSQL ledger at ${location} (${detail})`,
        'start PostgreSQL there, or correct DATUM_LEDGER_URL',
      ),
      { cause: error },
    );
  }
  if (code === '28P01' || code === '28000' || /\bSASL\b|password must be a string/i.test(detail)) {
    return new LedgerUnavailable(
      withFix(
        `PostgreSQL at ${location} refused the login (${detail})`,
        'correct the user and password in DATUM_LEDGER_URL, or allow this client in pg_hba.conf',
      ),
      { cause: error },
    );
  }
  if (code === '3D000') {
    const database = new URL(location).pathname.slice(1) || '(default)';
    return new LedgerUnavailable(
      withFix(
        `the database of DATUM_LEDGER_URL ${location} does not exist (${detail})`,
        `create it (createdb ${database}), or correct DATUM_LEDGER_URL`,
      ),
      { cause: error },
    );
  }
  if (code === '42501') {
    return new LedgerUnavailable(
      withFix(
        `PostgreSQL at ${location} denied the ledger's user (${detail})`,
        'grant it CREATE on the schema and INSERT/SELECT on the ledger tables, or use another user in DATUM_LEDGER_URL',
      ),
      { cause: error },
    );
  }
  return error;
}

/** Node 20 reports a refused dual-stack connect as an AggregateError with an empty message. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.message) return error.message;
  const inner = (error as { errors?: unknown[] }).errors;
  if (Array.isArray(inner) && inner.length > 0) return inner.map((e) => (e instanceof Error ? e.message : String(e))).join('; ');
  return (error as { code?: string }).code ?? error.name;
}
