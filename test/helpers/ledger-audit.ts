import { promises as fs } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { auditLedger, findingLine } from '../../src/domain/ledger-audit';
import { ledgerEntry } from '../../src/schemas';

/*
 * The ledger auditor over the stores the tests write (src/domain/ledger-audit.ts has the rules):
 * every SQLite ledger in a fleet directory, just before the fixture removes it (Fleet.remove, so
 * the Stack's own store and the ledger of every `datum worker --data FLEET` a test spawned), and
 * every PostgreSQL database of the test server before it stops. A finding fails the test file
 * that wrote the ledger, naming the node, the chain, the seq and the rule.
 */

export class LedgerAuditFailure extends Error {
  override readonly name = 'LedgerAuditFailure';
}

/**
 * Rows that are not v1 ledger entries are left out: the store itself refuses to return them
 * (store.test.ts writes one by direct SQL to show that); the rules are about entries.
 */
function check(where: string, raw: Array<{ chain_id: string; entry: unknown }>): void {
  const rows = raw.flatMap((r) => {
    const parsed = ledgerEntry.safeParse(r.entry);
    return parsed.success ? [{ chain_id: r.chain_id, entry: parsed.data }] : [];
  });
  const findings = auditLedger(rows);
  if (findings.length === 0) return;
  throw new LedgerAuditFailure(
    `the ledger at ${where} breaks its invariants (src/domain/ledger-audit.ts):\n${findings.map((f) => `  ${findingLine(f)}`).join('\n')}`,
  );
}

/** Every SQLite ledger file under `dir` (any depth; by content, not by name). */
async function sqliteLedgers(dir: string): Promise<string[]> {
  const found: string[] = [];
  const entries = await fs.readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  for (const e of entries) {
    if (!e.isFile() || !/\.(sqlite|db)$/.test(e.name)) continue;
    const file = path.join(e.parentPath, e.name);
    const head = await fs.readFile(file).then(
      (b) => b.subarray(0, 16).toString('latin1'),
      () => '',
    );
    if (head === 'SQLite format 3\u0000') found.push(file);
  }
  return found;
}

/** Audits every SQLite ledger under `dir`; throws LedgerAuditFailure on any finding. */
export async function auditSqliteLedgersUnder(dir: string): Promise<void> {
  for (const file of await sqliteLedgers(dir)) {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_entries'").get();
      if (!table) continue;
      const rows = db.prepare('SELECT chain_id, entry FROM ledger_entries').all() as Array<{ chain_id: string; entry: string }>;
      check(
        file,
        rows.map((r) => ({ chain_id: r.chain_id, entry: JSON.parse(r.entry) as unknown })),
      );
    } finally {
      db.close();
    }
  }
}

/** Audits the ledger of the PostgreSQL database at `url`, if it has one. */
export async function auditPostgresLedger(url: string): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const exists = await client.query("SELECT to_regclass('ledger_entries') AS t");
    if (!(exists.rows[0] as { t: string | null }).t) return;
    const { rows } = await client.query('SELECT chain_id, entry FROM ledger_entries');
    check(url.replace(/:[^:@/]*@/, ':***@'), rows as Array<{ chain_id: string; entry: unknown }>);
  } finally {
    await client.end();
  }
}
