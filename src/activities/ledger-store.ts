import path from 'node:path';
import { withFix } from '../contract';
import { LedgerConfigError, type LedgerStore } from './ledger-store/common';
import type { OperatorDecision } from '../domain';
import { openPostgresLedger, redactUrl } from './ledger-store/postgres';
import { openSqliteLedger } from './ledger-store/sqlite';

/*
 * The ledger: the append-only, queryable record of every decision, fleet-wide
 * (docs/architecture.md §2 "The parts and where they run"). A SQLite file by default, shared by
 * every process on one machine; PostgreSQL via
 * DATUM_LEDGER_URL=postgres://… when workers run on several machines. Both back ends keep the
 * whole v1 entry as JSON plus the columns people filter on, and both refuse the same inputs.
 */

export {
  InvalidLedgerEntry,
  InvalidLedgerQuery,
  LedgerConfigError,
  LedgerSeqConflict,
  LedgerUnavailable,
  SCHEMA_VERSION as LEDGER_SCHEMA_VERSION,
  type LedgerStore,
  type ListOptions,
  type NodeSummary,
} from './ledger-store/common';
export { redactUrl } from './ledger-store/postgres';

export interface LedgerStoreOptions {
  /** postgres://…, postgresql://… or sqlite:<path>; default: env DATUM_LEDGER_URL, then <dataDir>/ledger.sqlite. */
  url?: string;
  /** Where the default SQLite ledger lives; default `.datum` under the current directory. */
  dataDir?: string;
}

export type LedgerLocation = { backend: 'postgres'; url: string } | { backend: 'sqlite'; file: string };

/** Which ledger the options (and DATUM_LEDGER_URL) name, without opening it. */
export function resolveLedgerLocation(options: LedgerStoreOptions = {}, env: NodeJS.ProcessEnv = process.env): LedgerLocation {
  const fromEnv = env.DATUM_LEDGER_URL?.trim() ? env.DATUM_LEDGER_URL.trim() : undefined;
  const url = options.url ?? fromEnv;
  if (url === undefined || url === '') {
    return { backend: 'sqlite', file: path.resolve(options.dataDir ?? '.datum', 'ledger.sqlite') };
  }
  if (/^postgres(ql)?:\/\//i.test(url)) return { backend: 'postgres', url };
  if (/^sqlite:/i.test(url)) {
    // sqlite:/abs/file, sqlite:relative/file and the URL-ish sqlite:///abs/file all name a path.
    const file = url.slice('sqlite:'.length).replace(/^\/\//, '');
    if (file === '')
      throw new LedgerConfigError(
        withFix(`ledger URL "${url}" names no file`, 'write sqlite:<path>, such as sqlite:.datum/ledger.sqlite'),
      );
    return { backend: 'sqlite', file: file === ':memory:' ? file : path.resolve(file) };
  }
  throw new LedgerConfigError(
    withFix(
      `ledger URL ${redactUrl(url)}${options.url === undefined ? ' (from DATUM_LEDGER_URL)' : ''} is neither PostgreSQL nor SQLite`,
      'use postgres://user:password@host:5432/database, or sqlite:<path>, or unset DATUM_LEDGER_URL for <dataDir>/ledger.sqlite',
    ),
  );
}

/**
 * The operator decisions (yields, open conflicts) the store holds for a node: its copy of the
 * agent's record, kept by the agent's rules in each append's transaction
 * (ledger-store/decisions.ts; docs/architecture.md §4 "Targets and operator decisions"). Both back
 * ends keep it alike; empty when none.
 */
export async function operatorDecisionsOf(store: LedgerStore, node: string): Promise<OperatorDecision[]> {
  return await store.operatorDecisions(node);
}

/** Opens (creating the schema if needed) the ledger the options name. Close it when done. */
export async function openLedgerStore(options: LedgerStoreOptions = {}): Promise<LedgerStore> {
  const location = resolveLedgerLocation(options);
  return location.backend === 'postgres' ? await openPostgresLedger(location.url) : openSqliteLedger(location.file);
}
