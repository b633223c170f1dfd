// The ledger store against the real thing on both back ends: a SQLite file in a temp dir and a
// PostgreSQL server from test/helpers/postgres.ts. One suite, run once per back end, so the two
// cannot drift apart in what they keep, refuse or return.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  InvalidLedgerEntry,
  InvalidLedgerQuery,
  LEDGER_SCHEMA_VERSION,
  LedgerConfigError,
  LedgerSeqConflict,
  LedgerUnavailable,
  openLedgerStore,
  resolveLedgerLocation,
  type LedgerStore,
} from '../../src/activities/ledger-store';
import { canonicalJson, LEDGER_VERSION, type Decision, type LedgerEntry } from '../../src/domain';
import { reconcileWorkflowId } from '../../src/contract';
import { startPostgres, type TestPostgres } from '../helpers/postgres';
import { later, n24After, n24Before, NOW, oursFor, pass, snapshot } from '../unit/fixtures';
import { ledgerEntry } from '../../src/schemas';

// --- realistic entries, made by the domain -------------------------------------------------------

/** The seed's repair: build 7.3 → 7.4, app restarted, maintenance left to the operator. */
let REPAIRED: Decision;
const repaired = (): Decision => structuredClone(REPAIRED);
/** An hour-old observation: BLOCKED on STALE_OBSERVATION with one condition. */
let BLOCKED: Decision;
const blocked = (): Decision => structuredClone(BLOCKED);
beforeAll(async () => {
  REPAIRED = (await pass(snapshot(n24Before()), () => snapshot({ ...n24After(), markers: oursFor(['build', 'app']) }))).final
    .decision;
  BLOCKED = (await pass(snapshot(n24Before(), { at: later(-3_600_000) }), null)).final.decision;
});

const WORKFLOW = reconcileWorkflowId('N-24', 12);
const CHAIN = 'run-0001';
const at = (seconds: number) => later(seconds * 1000);

function entry(
  seq: number,
  decidedAt: string,
  o: { decision?: Decision; workflow_id?: string; node_id?: string } = {},
): LedgerEntry {
  const decision = o.decision ?? (seq % 2 === 0 ? blocked() : repaired());
  return {
    ...decision,
    node_id: o.node_id ?? decision.node_id,
    ledger_version: LEDGER_VERSION,
    seq,
    decided_at: decidedAt,
    workflow_id: o.workflow_id ?? WORKFLOW,
  };
}

const seqs = (entries: LedgerEntry[]) => entries.map((e) => e.seq);

// --- the back ends ---------------------------------------------------------------------------

let tmp: string;
let server: TestPostgres | undefined;
const started: Record<string, number> = {};

beforeAll(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), 'datum-ledger-test-'));
  const t = Date.now();
  server = await startPostgres();
  started.postgres = Date.now() - t;
}, 15 * 60_000); // a first run on a fresh machine installs PostgreSQL with apt-get

afterAll(async () => {
  await server?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** Direct SQL on a ledger, for what the store API deliberately cannot do (count rows, tamper). */
interface Raw {
  scalar(sql: string): Promise<unknown>;
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

const firstColumn = (row: unknown): unknown => (Object.values(row as object) as unknown[])[0];

function rawSqlite(url: string): Promise<Raw> {
  const db = new Database(url.slice('sqlite:'.length));
  return Promise.resolve({
    scalar: (sql) => Promise.resolve(firstColumn(db.prepare(sql).get())),
    exec: (sql) => new Promise((resolve) => resolve(void db.exec(sql))),
    close: () => Promise.resolve(void db.close()),
  });
}

async function rawPostgres(url: string): Promise<Raw> {
  const client = new Client({ connectionString: url });
  await client.connect();
  return {
    scalar: async (sql) => firstColumn((await client.query(sql)).rows[0]),
    exec: async (sql) => void (await client.query(sql)),
    close: () => client.end(),
  };
}

const backends = {
  sqlite: {
    fresh: (() => {
      let n = 0;
      return () => Promise.resolve(`sqlite:${path.join(tmp, `ledger-${++n}.sqlite`)}`);
    })(),
    raw: rawSqlite,
  },
  postgres: { fresh: () => server!.newDatabase(), raw: rawPostgres },
};

describe.each(['sqlite', 'postgres'] as const)('ledger store on %s', (backend) => {
  const opened: Array<LedgerStore | Raw> = [];
  let url: string;

  const open = async (where = url) => {
    const store = await openLedgerStore({ url: where });
    opened.push(store);
    return store;
  };
  const raw = async (where = url) => {
    const r = await backends[backend].raw(where);
    opened.push(r);
    return r;
  };
  const rowCount = async () => Number(await (await raw()).scalar('SELECT COUNT(*) AS n FROM ledger_entries'));

  beforeAll(() => {
    if (backend === 'postgres') console.log(`postgres helper: server ready in ${started.postgres} ms`);
  });

  // Every test gets a ledger of its own: a new file, or a new database on the one server.
  beforeEach(async () => {
    url = await backends[backend].fresh();
  });

  afterEach(async () => {
    for (const o of opened.splice(0).reverse()) await o.close();
  });

  it('keeps every field of a realistic entry through append and list', async () => {
    const store = await open();
    expect(store.backend).toBe(backend);
    const repair = entry(1, at(0), { decision: repaired() });
    const stale = entry(2, at(30), { decision: blocked() });
    // Text that JSON and SQL both have opinions about must come back byte for byte.
    stale.reason_detail = `${stale.reason_detail} — "quoted" 'single' \\ back\tslash, ünïcødé, 🚀, ${'x'.repeat(2000)}`;
    expect(repair.authorized_actions.length).toBeGreaterThan(0);
    expect(repair.execution_evidence.length).toBeGreaterThan(0);
    expect(stale.conditions.length).toBeGreaterThan(0);

    expect(await store.append(repair, CHAIN)).toBe('appended');
    expect(await store.append(stale, CHAIN)).toBe('appended');

    const listed = await store.list('N-24');
    expect(listed).toEqual([repair, stale]);
    // In the schema's key order on both back ends (jsonb would otherwise impose its own).
    expect(Object.keys(listed[0])).toEqual(Object.keys(ledgerEntry.parse(repair)));
    // Also as canonical JSON: toEqual would forgive an undefined-for-absent slip.
    expect(listed.map(canonicalJson)).toEqual([repair, stale].map(canonicalJson));
    expect(await store.nodes()).toEqual([{ node: 'N-24', entries: 2, last_decided_at: at(30), last_status: 'BLOCKED' }]);
  });

  it('records a retried append once and answers duplicate', async () => {
    const store = await open();
    const e = entry(1, NOW);
    expect(await store.append(e, CHAIN)).toBe('appended');
    expect(await store.append(e, CHAIN)).toBe('duplicate');
    // The retry as an activity would see it: the same entry after a trip through JSON.
    expect(await store.append(JSON.parse(JSON.stringify(e)) as LedgerEntry, CHAIN)).toBe('duplicate');
    expect(await rowCount()).toBe(1);
  });

  it('refuses a different entry under a key already taken, keeping the first', async () => {
    const store = await open();
    const first = entry(1, NOW, { decision: repaired() });
    await store.append(first, CHAIN);
    const other = entry(1, at(5), { decision: blocked() });
    await expect(store.append(other, CHAIN)).rejects.toThrow(LedgerSeqConflict);
    await expect(store.append(other, CHAIN)).rejects.toThrow(
      /different entry for workflow datum\/N-24\/gen-12 chain run-0001 seq 1/,
    );
    expect(await store.list('N-24')).toEqual([first]);
  });

  it('takes the same decision decided again on a later clock (a retried workflow task) as a duplicate, keeping the first', async () => {
    const store = await open();
    const first = entry(1, NOW, { decision: repaired() });
    await store.append(first, CHAIN);
    // What a workflow task run again after its worker died mid-append records: the same decision,
    // ten seconds later by the workflow clock, so its times and its trigger's not_before differ.
    const again = structuredClone(first);
    again.decided_at = at(10);
    again.recheck_trigger = { ...again.recheck_trigger, not_before: at(40) };
    expect(await store.append(again, CHAIN)).toBe('duplicate');
    expect(await store.list('N-24')).toEqual([first]);
    // A decision that says something else is still a conflict.
    const other = structuredClone(first);
    other.convergence_status = 'BLOCKED';
    await expect(store.append(other, CHAIN)).rejects.toThrow(LedgerSeqConflict);
  });

  it('lands concurrent appends of the same entries once, from several connections and processes', async () => {
    const module = path.resolve('dist/src/activities/ledger-store.js');
    expect(existsSync(module), `${module} is built by the test global set-up`).toBe(true);
    const entries = Array.from({ length: 8 }, (_, i) => entry(i + 1, at(i)));
    const file = path.join(tmp, `entries-${backend}.json`);
    writeFileSync(file, JSON.stringify(entries));

    // Four processes (controller workers) open the same, not yet created, ledger at once, which
    // also races the schema creation; then all append all entries concurrently.
    const workers = Array.from({ length: 4 }, () => appendFromChild(module, url, file));
    let results: string[][];
    try {
      await Promise.all(workers.map((w) => w.ready));
      for (const w of workers) w.go();
      results = await Promise.all(workers.map((w) => w.done));
    } finally {
      for (const w of workers) w.kill();
    }
    for (let i = 0; i < entries.length; i++) {
      expect(results.map((r) => r[i]).sort(), `entry seq ${i + 1}`).toEqual(['appended', 'duplicate', 'duplicate', 'duplicate']);
    }

    // And several connections in this process, all on one new entry.
    const stores = await Promise.all([open(), open(), open()]);
    const extra = entry(9, at(9));
    const outcomes = await Promise.all(stores.flatMap((s) => [s.append(extra, CHAIN), s.append(extra, CHAIN)]));
    expect(outcomes.filter((o) => o === 'appended')).toHaveLength(1);

    expect(await rowCount()).toBe(9);
    expect(seqs(await stores[0].list('N-24'))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('lists by decided_at then seq, and filters by node, since, workflow and limit', async () => {
    const store = await open();
    const gen13 = reconcileWorkflowId('N-24', 13);
    const appended = [
      entry(3, at(20)),
      entry(1, at(0)),
      entry(5, at(30)), // same instant as seq 4, appended first: seq breaks the tie
      entry(4, at(30)),
      entry(2, at(10)),
      entry(1, at(25), { workflow_id: gen13 }),
      entry(1, at(15), { node_id: 'N-25', workflow_id: reconcileWorkflowId('N-25', 12) }),
    ];
    for (const e of appended) await store.append(e, CHAIN);

    const all = await store.list('N-24');
    expect(all.map((e) => `${e.workflow_id}#${e.seq}`)).toEqual([
      `${WORKFLOW}#1`,
      `${WORKFLOW}#2`,
      `${WORKFLOW}#3`,
      `${gen13}#1`,
      `${WORKFLOW}#4`,
      `${WORKFLOW}#5`,
    ]);
    // since is inclusive, and means the same instant whatever zone it is written in.
    expect(seqs(await store.list('N-24', { since: at(20), workflowId: WORKFLOW }))).toEqual([3, 4, 5]);
    const sameInstantInParis = at(20).replace(/^(\d{4}-\d\d-\d\d)T12:(\d\d:\d\d)\.000Z$/, '$1T13:$2+01:00');
    expect(sameInstantInParis).not.toBe(at(20));
    expect(seqs(await store.list('N-24', { since: sameInstantInParis, workflowId: WORKFLOW }))).toEqual([3, 4, 5]);
    expect(await store.list('N-24', { since: later(60_000) })).toEqual([]);
    expect(await store.list('N-24', { since: NOW.slice(0, 10) })).toHaveLength(6);
    expect(seqs(await store.list('N-24', { workflowId: gen13 }))).toEqual([1]);
    expect(seqs(await store.list('N-24', { limit: 2 }))).toEqual([1, 2]);
    expect(seqs(await store.list('N-24', { since: at(10), limit: 2 }))).toEqual([2, 3]);
    expect(seqs(await store.list('N-25'))).toEqual([1]);
    expect(await store.list('N-99')).toEqual([]);

    expect(await store.nodes()).toEqual([
      { node: 'N-24', entries: 6, last_decided_at: at(30), last_status: 'CONVERGED' }, // seq 5, odd: repaired
      { node: 'N-25', entries: 1, last_decided_at: at(15), last_status: 'CONVERGED' },
    ]);
  });

  it('keeps both chains of a workflow id that was terminated and started again', async () => {
    const store = await open();
    const firstRun = [entry(1, at(0)), entry(2, at(10))];
    const restarted = [entry(1, at(20)), entry(2, at(30))];
    for (const e of firstRun) expect(await store.append(e, 'run-A')).toBe('appended');
    for (const e of restarted) expect(await store.append(e, 'run-B')).toBe('appended');
    expect(await store.list('N-24')).toEqual([...firstRun, ...restarted]);
    expect(await rowCount()).toBe(4);
  });

  it('still has every entry after the store is closed and opened again', async () => {
    const first = await open();
    const entries = [entry(1, at(0)), entry(2, at(10))];
    for (const e of entries) await first.append(e, CHAIN);
    await first.close();
    await expect(first.list('N-24')).rejects.toThrow(/is closed/);

    const again = await open();
    expect(await again.list('N-24')).toEqual(entries);
    expect(await again.append(entries[1], CHAIN)).toBe('duplicate');
    expect(await (await raw()).scalar('SELECT MAX(version) AS v FROM ledger_schema_versions')).toBe(LEDGER_SCHEMA_VERSION);
  });

  it('refuses an invalid entry, naming each bad field, and writes nothing', async () => {
    const store = await open();
    const bad = { ...entry(1, NOW), convergence_status: 'GREAT', seq: 0 } as unknown as LedgerEntry;
    const error = await store.append(bad, CHAIN).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLedgerEntry);
    expect((error as Error).message).toMatch(/ledger entry seq 0 of workflow datum\/N-24\/gen-12 \(node N-24\): not recorded/);
    expect((error as Error).message).toMatch(/- convergence_status: /);
    expect((error as Error).message).toMatch(/- seq: /);

    await expect(store.append(entry(1, 'yesterday'), CHAIN)).rejects.toThrow(/- decided_at: "yesterday" is not an ISO 8601 time/);
    await expect(store.append(entry(1, NOW), '')).rejects.toThrow(/- chainId: must be 1 to 256 characters/);
    const { reason: _, ...noReason } = entry(1, NOW);
    await expect(store.append(noReason as LedgerEntry, CHAIN)).rejects.toThrow(/- reason: /);
    expect(await rowCount()).toBe(0);
  });

  it('refuses a since that is not an ISO time, and a limit that is not a positive count', async () => {
    const store = await open();
    for (const since of ['yesterday', '2026-11-29 12:00', '2026-11-29T12:00:00', '2026-13-01T00:00:00Z']) {
      const error = await store.list('N-24', { since }).catch((e: unknown) => e);
      expect(error, since).toBeInstanceOf(InvalidLedgerQuery);
      expect((error as Error).message).toContain(`since ${JSON.stringify(since)} is not an ISO 8601 time`);
      expect((error as Error).message).toContain('fix: write a UTC time such as');
    }
    for (const limit of [0, -1, 1.5]) {
      await expect(store.list('N-24', { limit })).rejects.toThrow(/is not a positive whole number/);
    }
  });

  it('refuses UPDATE and DELETE on recorded entries, even by direct SQL', async () => {
    const store = await open();
    await store.append(entry(1, NOW), CHAIN);
    const r = await raw();
    await expect(r.exec("UPDATE ledger_entries SET reason = 'ALREADY_CONVERGED'")).rejects.toThrow(/append-only/);
    await expect(r.exec('DELETE FROM ledger_entries')).rejects.toThrow(/append-only/);
    expect(await store.list('N-24')).toEqual([entry(1, NOW)]);
  });

  it('reports a stored row that is not a v1 entry instead of returning it', async () => {
    const store = await open();
    await (
      await raw()
    ).exec(
      `INSERT INTO ledger_entries (node_id, workflow_id, chain_id, seq, decided_at, desired_generation, convergence_status, reason, ledger_version, entry)
       VALUES ('N-24', 'by-hand', 'c', 1, '2026-11-29T12:00:00.000Z', 1, 'CONVERGED', 'ALREADY_CONVERGED', 1, '{"seq": 1, "node_id": "N-24"}')`,
    );
    await expect(store.list('N-24')).rejects.toThrow(
      /stored ledger entry seq 1 \(node N-24\): in the ledger but not a valid v1 entry/,
    );
  });

  it('will not open a ledger whose schema is newer than this code', async () => {
    await (await open()).close();
    await (await raw()).exec(`INSERT INTO ledger_schema_versions (version) VALUES (${LEDGER_SCHEMA_VERSION + 1})`);
    const error = await openLedgerStore({ url }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LedgerConfigError);
    expect((error as Error).message).toContain(
      `has schema version ${LEDGER_SCHEMA_VERSION + 1}, newer than this Datum understands (${LEDGER_SCHEMA_VERSION}) — fix: upgrade Datum`,
    );
  });
});

// --- opening: where the ledger is, and when it cannot be opened -------------------------------

describe('opening the ledger', () => {
  it('resolves postgres URLs, sqlite: paths, DATUM_LEDGER_URL and the default file', () => {
    const env = (v?: string) => (v === undefined ? {} : { DATUM_LEDGER_URL: v });
    expect(resolveLedgerLocation({}, env())).toEqual({ backend: 'sqlite', file: path.resolve('.datum/ledger.sqlite') });
    expect(resolveLedgerLocation({ dataDir: '/var/lib/datum' }, env('  '))).toEqual({
      backend: 'sqlite',
      file: '/var/lib/datum/ledger.sqlite',
    });
    expect(resolveLedgerLocation({}, env('postgresql://u:p@db/ledger'))).toEqual({
      backend: 'postgres',
      url: 'postgresql://u:p@db/ledger',
    });
    expect(resolveLedgerLocation({ url: 'sqlite:/srv/l.db' }, env('postgres://db/x'))).toEqual({
      backend: 'sqlite',
      file: '/srv/l.db',
    });
    expect(resolveLedgerLocation({ url: 'sqlite:///srv/l.db' })).toEqual({ backend: 'sqlite', file: '/srv/l.db' });
    expect(resolveLedgerLocation({ url: 'sqlite:rel/l.db' })).toEqual({ backend: 'sqlite', file: path.resolve('rel/l.db') });
    expect(() => resolveLedgerLocation({}, env('mysql://u:hunter2@db/x'))).toThrow(LedgerConfigError);
    expect(() => resolveLedgerLocation({}, env('mysql://u:hunter2@db/x'))).toThrow(
      /mysql:\/\/u@db\/x \(from DATUM_LEDGER_URL\) is neither PostgreSQL nor SQLite/,
    );
  });

  it('creates the data directory for the default SQLite ledger', async () => {
    const dataDir = path.join(tmp, 'not', 'yet', 'there');
    const store = await openLedgerStore({ dataDir });
    try {
      expect(store.location).toBe(path.join(dataDir, 'ledger.sqlite'));
      expect(existsSync(store.location)).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('says so clearly when the SQLite file cannot be created', async () => {
    const blocker = path.join(tmp, 'a-file');
    writeFileSync(blocker, '');
    await expect(openLedgerStore({ url: `sqlite:${blocker}/ledger.sqlite` })).rejects.toThrow(LedgerUnavailable);
    await expect(openLedgerStore({ url: `sqlite:${blocker}/ledger.sqlite` })).rejects.toThrow(
      /cannot open the SQLite ledger at .*a-file\/ledger\.sqlite: .* — fix: /,
    );
  });

  it('names an unreachable PostgreSQL without its password and says how to fix it', async () => {
    const port = await closedPort();
    const error = await openLedgerStore({ url: `postgres://datum:s3cret-pw@127.0.0.1:${port}/ledger` }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LedgerUnavailable);
    const message = (error as Error).message;
    expect(message).toContain(`cannot reach the PostgreSQL ledger at postgres://datum@127.0.0.1:${port}/ledger (`);
    expect(message).toContain('fix: start PostgreSQL there, or correct DATUM_LEDGER_URL');
    // Nowhere in the error, its cause or its stack.
    expect(inspect(error, { depth: 10 })).not.toContain('s3cret-pw');
  });

  it('names a wrong password and a missing database on a live server, without the password', async () => {
    const live = new URL(server!.url);
    live.password = 'wrong-pw';
    const refused = await openLedgerStore({ url: live.toString() }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LedgerUnavailable);
    expect((refused as Error).message).toMatch(/refused the login .* — fix: correct the user and password in DATUM_LEDGER_URL/);
    expect(inspect(refused, { depth: 10 })).not.toContain('wrong-pw');

    const missing = new URL(server!.url);
    missing.pathname = '/no_such_ledger';
    const error = await openLedgerStore({ url: missing.toString() }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LedgerUnavailable);
    expect((error as Error).message).toMatch(/does not exist .* — fix: create it \(createdb no_such_ledger\)/);
    expect(inspect(error, { depth: 10 })).not.toContain(new URL(server!.url).password);
  });
});

// --- helpers ---------------------------------------------------------------------------------

/** A loopback port nothing listens on (free a moment ago). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/**
 * A separate Node process on the built store (what a controller worker runs): opens the ledger,
 * says "ready", waits for "go", appends every entry of `file` concurrently, prints the outcomes.
 */
function appendFromChild(module: string, url: string, file: string) {
  const script = `
    const { openLedgerStore } = require(process.env.LEDGER_MODULE);
    const entries = JSON.parse(require('node:fs').readFileSync(process.env.LEDGER_ENTRIES, 'utf8'));
    (async () => {
      const store = await openLedgerStore({ url: process.env.LEDGER_URL });
      process.stdout.write('ready\\n');
      await new Promise((resolve) => process.stdin.once('data', resolve));
      const results = await Promise.all(entries.map((e) => store.append(e, ${JSON.stringify(CHAIN)})));
      await store.close();
      process.stdout.write(JSON.stringify(results) + '\\n');
    })().catch((e) => { process.stderr.write(String((e && e.stack) || e)); process.exit(1); });`;
  const child = spawn(process.execPath, ['-e', script], {
    env: { ...process.env, LEDGER_MODULE: module, LEDGER_URL: url, LEDGER_ENTRIES: file },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  let onReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.startsWith('ready\n')) onReady();
  });
  const done = new Promise<string[]>((resolve, reject) => {
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`appending child exited ${code}:\n${err}`));
      else resolve(JSON.parse(out.slice('ready\n'.length)) as string[]);
    });
  });
  // A child that dies before "ready" must fail the test, not hang it.
  const readyOrDead = Promise.race([ready, done.then(() => Promise.reject(new Error(`child exited before ready:\n${err}`)))]);
  return {
    ready: readyOrDead,
    done,
    go: () => child.stdin.end('go\n'),
    /** For a test that failed midway: a child waiting for "go" would wait forever. */
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
