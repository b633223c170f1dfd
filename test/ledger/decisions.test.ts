// The ledger store's copy of the agent's operator decisions (yields, open conflicts), on both back
// ends: a SQLite file and a real PostgreSQL server. What a new run chain is given back
// (storedDecisions) when a node lost its .datum/, so each test says what the next generation
// would start from. docs/architecture.md §4 "Targets and operator decisions".

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Client } from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LEDGER_SCHEMA_VERSION, openLedgerStore, operatorDecisionsOf, type LedgerStore } from '../../src/activities/ledger-store';
import {
  decisionRequest,
  emptyHistory,
  LEDGER_VERSION,
  noteDecision,
  type ApplyFailure,
  type AuthorizedAction,
  type BoundIntent,
  type Decision,
  type ExecutionEvidence,
  type LedgerEntry,
  type OperatorDecision,
} from '../../src/domain';
import { reconcileWorkflowId } from '../../src/contract';
import { startPostgres, type TestPostgres } from '../helpers/postgres';
import { applied, later, n24, n24After, n24Before, oursFor, pass, SHA_73, snapshot } from '../unit/fixtures';
import { operatorDecision } from '../../src/schemas';

// --- the node's generations and what their loops record ---------------------------------------

/** Generation 12 runs release 7.3; 13 and later ask for 7.4 (the seed's repair). */
const BUILD_73 = { type: 'release', version: '7.3', artifact: 'artifacts/app-7.3.tgz', sha256: SHA_73 };
const gen = (generation: number): BoundIntent => (generation === 12 ? n24(12, { extra: { build: BUILD_73 } }) : n24(generation));
const RELEASE = 'release:current';

let clock = 0;
let seqs: Record<string, number> = {};
beforeEach(() => {
  clock = 0;
  seqs = {};
});

/** The next entry of generation `g`'s loop, decided after every entry made before it. */
function entry(g: number, decision: Decision, held?: OperatorDecision[]): LedgerEntry {
  const workflow_id = reconcileWorkflowId('N-24', g);
  seqs[workflow_id] = (seqs[workflow_id] ?? 0) + 1;
  return {
    ...decision,
    ...(held ? { operator_decisions: held } : {}),
    ledger_version: LEDGER_VERSION,
    seq: seqs[workflow_id],
    decided_at: later(++clock * 1000),
    workflow_id,
  };
}

/** A pass of generation `g` that finds the node as it should be and writes nothing. */
async function steady(g: number, held: OperatorDecision[]): Promise<LedgerEntry> {
  const state = g === 12 ? n24Before() : n24After();
  return entry(g, (await pass(snapshot(state), null, { intent: gen(g) })).first.decision, held);
}

/**
 * A pass of generation `g` (13 or later) that installs release 7.4 and restarts the app: Datum's
 * own writes; `failed`: the install fails, and nothing after it is tried.
 */
async function repair(g: number, o: { failed?: boolean } = {}): Promise<LedgerEntry> {
  const post = () => snapshot(o.failed ? n24Before() : { ...n24After(), markers: oursFor(['build', 'app']) });
  const answer = (a: AuthorizedAction): ExecutionEvidence | ApplyFailure =>
    o.failed && a.action === 'release.install' ? { kind: 'failed', detail: 'ArtifactFetchFailed: connection reset' } : applied(a);
  const decision = (await pass(snapshot(n24Before()), post, { intent: gen(g), answer })).final.decision;
  const build = decision.execution_evidence.find((e) => e.resource_key === 'build');
  expect(build?.outcome).toBe(o.failed ? 'failed' : 'applied');
  return entry(g, decision);
}

/** A decision the loop of generation `g` holds about the release, as heldDecisions lists it. */
function held(g: number, kind: 'yield' | 'conflict'): OperatorDecision {
  const request = decisionRequest(gen(g), 'build', {
    kind,
    by: kind === 'yield' ? 'oncall' : 'datum',
    at: later(clock * 1000),
    note: null,
  });
  if (!request) throw new Error('generation has no build');
  const { node: _node, ...rest } = request;
  return operatorDecision.parse(rest);
}

/** The note resolveConflict records in generation `g`'s loop, with the request it sent the agent. */
function resolved(g: number, resolution: 'yield' | 'retake'): LedgerEntry {
  const intent = gen(g);
  const request = decisionRequest(intent, 'build', { kind: resolution, by: 'oncall', at: later(clock * 1000), note: null });
  if (!request) throw new Error('generation has no build');
  const note = noteDecision(
    intent,
    null,
    emptyHistory(),
    {
      reason: 'OPERATOR_RESOLUTION_RECORDED',
      detail: `oncall resolved the conflict on "build" by ${resolution}`,
      resolution: { ...request, kind: resolution },
    },
    later(clock * 1000),
  );
  return entry(g, note.decision);
}

/** A note that records no resolution (a refresh to the same generation re-bound the loop). */
function rebound(g: number): LedgerEntry {
  const note = noteDecision(gen(g), null, emptyHistory(), { reason: 'REBOUND', detail: 're-bound' }, later(clock * 1000));
  return entry(g, note.decision);
}

const kinds = (decisions: OperatorDecision[]) => decisions.map((d) => `${d.target}:${d.kind}@${d.generation}`);

// --- the back ends ---------------------------------------------------------------------------

let tmp: string;
let server: TestPostgres | undefined;
beforeAll(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), 'datum-decisions-test-'));
  server = await startPostgres();
}, 15 * 60_000); // a first run on a fresh machine installs PostgreSQL with apt-get
afterAll(async () => {
  await server?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** Direct SQL, for what the store API cannot do: take a store back to what the previous release left. */
async function rawExec(url: string, statements: string[]): Promise<void> {
  if (url.startsWith('sqlite:')) {
    const db = new Database(url.slice('sqlite:'.length));
    try {
      for (const s of statements) db.exec(s);
    } finally {
      db.close();
    }
    return;
  }
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    for (const s of statements) await client.query(s);
  } finally {
    await client.end();
  }
}

let files = 0;
const fresh = {
  sqlite: () => Promise.resolve(`sqlite:${path.join(tmp, `ledger-${++files}.sqlite`)}`),
  postgres: () => server!.newDatabase(),
};

describe.each(['sqlite', 'postgres'] as const)('operator decisions the ledger store keeps, on %s', (backend) => {
  const opened: LedgerStore[] = [];
  let url: string;
  const open = async () => {
    const store = await openLedgerStore({ url });
    opened.push(store);
    return store;
  };
  const appendAll = async (store: LedgerStore, entries: LedgerEntry[]) => {
    for (const e of entries) expect(await store.append(e, `chain-${e.workflow_id}`)).toBe('appended');
  };

  beforeEach(async () => {
    url = await fresh[backend]();
  });
  afterEach(async () => {
    for (const s of opened.splice(0).reverse()) await s.close();
  });

  it("an old loop's pass appended after a hand-over does not give back the yield the new generation's write ended", async () => {
    const store = await open();
    const yielded = held(12, 'yield');
    await appendAll(store, [await steady(12, [yielded]), await repair(13)]);
    expect(await operatorDecisionsOf(store, 'N-24')).toEqual([]);
    // Generation 12's loop was still finishing a pass: decided (and appended) last, it holds the yield.
    await appendAll(store, [await steady(12, [yielded])]);
    // A generation that goes back to 7.3 finds no yield: the operator's word ended with 7.4's write.
    expect(await operatorDecisionsOf(store, 'N-24')).toEqual([]);
  });

  it('an older generation appended late opens nothing: the store fences per node like the agent', async () => {
    const store = await open();
    await appendAll(store, [await steady(13, [])]);
    await appendAll(store, [await steady(12, [held(12, 'conflict')])]);
    expect(await operatorDecisionsOf(store, 'N-24')).toEqual([]);
    // The newest generation's own findings still count, and the fence holds for the one after too.
    await appendAll(store, [await steady(13, [held(13, 'conflict')])]);
    expect(kinds(await operatorDecisionsOf(store, 'N-24'))).toEqual([`${RELEASE}:conflict@13`]);
  });

  it('a retake ends the conflict at its note, before a pass records an entry after it', async () => {
    const store = await open();
    const conflict = await steady(13, [held(13, 'conflict')]);
    await appendAll(store, [conflict, resolved(13, 'retake')]);
    // A rollout now starts the next generation from here: it must not get the conflict back.
    expect(await operatorDecisionsOf(store, 'N-24')).toEqual([]);
    // A retried append of the entry before the retake changes nothing: it is already recorded.
    expect(await store.append(conflict, `chain-${conflict.workflow_id}`)).toBe('duplicate');
    expect(await operatorDecisionsOf(store, 'N-24')).toEqual([]);
  });

  it('a yield holds from its note, and a conflict found later about the same spec does not replace it', async () => {
    const store = await open();
    await appendAll(store, [await steady(13, [held(13, 'conflict')]), resolved(13, 'yield')]);
    expect(kinds(await operatorDecisionsOf(store, 'N-24'))).toEqual([`${RELEASE}:yield@13`]);
    expect((await operatorDecisionsOf(store, 'N-24'))[0]?.by).toBe('oncall');
    await appendAll(store, [await steady(14, [held(14, 'conflict')])]);
    expect(kinds(await operatorDecisionsOf(store, 'N-24'))).toEqual([`${RELEASE}:yield@13`]);
  });

  it('a conflict outlives a generation that changed its spec without writing it, so a revert finds it again', async () => {
    const store = await open();
    // Generation 12 finds another writer on the 7.3 release; 13 asks for 7.4, and its pass
    // writes nothing (its loop holds no decision: the spec it was about changed).
    await appendAll(store, [await steady(12, [held(12, 'conflict')]), await steady(13, [])]);
    // The agent still holds the conflict, so the store must too: generation 14 reverting to 7.3
    // starts CONFLICT whether or not the node kept its .datum/.
    expect(kinds(await operatorDecisionsOf(store, 'N-24'))).toEqual([`${RELEASE}:conflict@12`]);
    // Datum's own accepted write of another spec (7.4) is what ends it, as it does on the agent.
    await appendAll(store, [await repair(14)]);
    expect(await operatorDecisionsOf(store, 'N-24')).toEqual([]);
  });

  it('a write that failed ends nothing', async () => {
    const store = await open();
    await appendAll(store, [await steady(12, [held(12, 'conflict')]), await repair(13, { failed: true })]);
    expect(kinds(await operatorDecisionsOf(store, 'N-24'))).toEqual([`${RELEASE}:conflict@12`]);
  });

  it('appends for one node from several connections at once all reach its copy', async () => {
    const stores = await Promise.all([open(), open(), open(), open()]);
    // Eight loops' findings on eight flags of one node, in one generation, appended concurrently.
    const base = await steady(13, []);
    // The chain's first entry, so the eight that follow are seq 2..9 of a whole chain (the ledger auditor).
    await stores[0].append(base, 'chain-many');
    const entries = Array.from({ length: 8 }, (_, i) => {
      const d = held(13, 'conflict');
      return entry(13, base, [{ ...d, resource_key: `flag${i}`, target: `flag:flag${i}` }]);
    });
    await Promise.all(entries.map((e, i) => stores[i % stores.length].append(e, 'chain-many')));
    expect((await operatorDecisionsOf(stores[0], 'N-24')).map((d) => d.target)).toEqual(
      Array.from({ length: 8 }, (_, i) => `flag:flag${i}`),
    );
  });

  it('a store the previous release wrote keeps what it answered after the upgrade, then follows the new rules', async () => {
    const first = await open();
    const conflict = held(12, 'conflict');
    // What the previous release recorded: passes holding a conflict, then a note (it kept none on notes).
    await appendAll(first, [await steady(12, [conflict]), await steady(12, [conflict]), rebound(12)]);
    await first.close();
    // Take the store back to that release's schema: entries only, schema version 1.
    await rawExec(url, ['DROP TABLE node_operator_decisions', 'DELETE FROM ledger_schema_versions WHERE version > 1']);

    const upgraded = await open();
    // Its answer was the newest pass entry's decisions: nothing it held is lost by the upgrade.
    expect(kinds(await operatorDecisionsOf(upgraded, 'N-24'))).toEqual([`${RELEASE}:conflict@12`]);
    // The migration knew the node's newest generation, so an older loop is fenced from the start.
    await appendAll(upgraded, [await steady(11, [held(11, 'yield')])]);
    expect(kinds(await operatorDecisionsOf(upgraded, 'N-24'))).toEqual([`${RELEASE}:conflict@12`]);
    await appendAll(upgraded, [resolved(12, 'retake')]);
    expect(await operatorDecisionsOf(upgraded, 'N-24')).toEqual([]);
    await upgraded.close();
    // Opened again (the schema is current now), it migrates nothing twice.
    const again = await open();
    expect(await operatorDecisionsOf(again, 'N-24')).toEqual([]);
    expect(await operatorDecisionsOf(again, 'N-99')).toEqual([]);
    expect(LEDGER_SCHEMA_VERSION).toBe(3);
  });
});
