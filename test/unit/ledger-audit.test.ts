import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { LEDGER_VERSION, type LedgerEntry } from '../../src/domain';
import { auditLedger, type AuditedRow } from '../../src/domain/ledger-audit';
import { auditSqliteLedgersUnder, LedgerAuditFailure } from '../helpers/ledger-audit';
import { NOW, n24After, pass, snapshot } from './fixtures';

/*
 * The ledger auditor's rules, each shown to catch what it names and to pass what is right. The
 * suite runs it over every ledger it writes (test/helpers/ledger-audit.ts); here the entries are
 * written by hand, with only the fields the rules read.
 */

const D1 = 'sha256:' + '1'.repeat(64);
const D2 = 'sha256:' + '2'.repeat(64);

function entry(seq: number, o: Partial<LedgerEntry> = {}): LedgerEntry {
  return {
    node_id: 'A-1',
    workflow_id: 'datum/A-1/gen-1',
    seq,
    desired_generation: 1,
    desired_digest: D1,
    observation_fresh: true,
    mode: 'enforce',
    resources: [],
    authorized_actions: [],
    attempt_count: 0,
    retry_budget: 3,
    convergence_status: 'CONVERGED',
    reason: 'ALREADY_CONVERGED',
    ...o,
  } as LedgerEntry;
}

const chain = (...entries: LedgerEntry[]): AuditedRow[] => entries.map((e) => ({ chain_id: 'run-1', entry: e }));
const rules = (rows: AuditedRow[]) => auditLedger(rows).map((f) => `${f.seq}:${f.rule}`);

describe('the ledger auditor', () => {
  it('passes a chain that keeps every rule, and a note that carries CONVERGED for what was observed', () => {
    const note = entry(2, { observation_fresh: false, reason: 'SIGNAL_REJECTED' });
    const retry = entry(3, { convergence_status: 'RETRY', reason: 'ACTION_FAILED', attempt_count: 2 });
    expect(rules(chain(entry(1), note, retry))).toEqual([]);
  });

  it('finds a gap and a repeat in seq, per chain', () => {
    expect(rules(chain(entry(1), entry(3)))).toEqual(['3:SEQ']);
    expect(rules([...chain(entry(1)), { chain_id: 'run-2', entry: entry(1) }])).toEqual([]);
  });

  it('finds a note that carries CONVERGED onto content no fresh observation judged', () => {
    const rebound = entry(2, { observation_fresh: false, desired_digest: D2, reason: 'REBOUND' });
    const found = auditLedger(chain(entry(1), rebound));
    expect(found.map((f) => f.rule)).toEqual(['CONVERGED_WITHOUT_OBSERVATION']);
    expect(found[0].detail).toMatch(/last fresh observation \(seq 1\) judged generation 1 digest sha256:1{64}/);
    // Nor one after a fresh observation that found something else, nor one with none before it.
    const blocked = entry(1, { convergence_status: 'BLOCKED', reason: 'NODE_UNREACHABLE' });
    expect(rules(chain(blocked, entry(2, { observation_fresh: false })))).toEqual(['2:CONVERGED_WITHOUT_OBSERVATION']);
    expect(rules(chain(entry(1, { observation_fresh: false })))).toEqual(['1:CONVERGED_WITHOUT_OBSERVATION']);
  });

  it('finds RETRY once the retry budget is spent', () => {
    const spent = entry(2, { convergence_status: 'RETRY', reason: 'DRIFT_DETECTED', attempt_count: 3 });
    expect(rules(chain(entry(1), spent))).toEqual(['2:RETRY_PAST_BUDGET']);
  });

  it('finds an action authorized in observe mode, on a protected or yielded resource, or a destructive one', () => {
    const action = (resource_key: string, act = 'file.write') =>
      ({ resource_key, action: act }) as LedgerEntry['authorized_actions'][number];
    const resource = (resource_key: string, ownership: string, effective_mode = 'enforce') =>
      ({ resource_key, ownership, effective_mode }) as LedgerEntry['resources'][number];
    const observing = entry(1, { mode: 'observe', authorized_actions: [action('config')] });
    expect(auditLedger(chain(observing)).map((f) => f.detail)).toEqual(['file.write on "config" authorized in observe mode']);
    const protectedOnes = entry(1, {
      resources: [
        resource('a', 'OPERATOR_OWNED'),
        resource('b', 'UNKNOWN'),
        resource('c', 'MANAGED', 'observe'),
        resource('d', 'MANAGED'),
      ],
      authorized_actions: [action('a'), action('b'), action('c'), action('d'), action('e', 'file.delete')],
      operator_decisions: [{ resource_key: 'd', kind: 'yield' } as NonNullable<LedgerEntry['operator_decisions']>[number]],
    });
    expect(auditLedger(chain(protectedOnes)).map((f) => f.detail)).toEqual([
      'file.write on "a" authorized on an OPERATOR_OWNED resource',
      'file.write on "b" authorized on an UNKNOWN resource',
      'file.write on "c" authorized while the resource is in observe mode',
      'file.write on "d" authorized on a resource the operator yielded',
      'file.delete on "e" authorized: a destructive action',
    ]);
  });

  it('reads every SQLite ledger under a directory, as Fleet.remove runs it, and fails naming the finding', async () => {
    // Real entries: a pass's decision (N-24 found at desired) with the ledger's own fields.
    const decision = (await pass(snapshot(n24After()), null)).first.decision;
    const real = (seq: number): LedgerEntry => ({
      ...decision,
      ledger_version: LEDGER_VERSION,
      seq,
      decided_at: NOW,
      workflow_id: 'datum/N-24/gen-12',
    });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'datum-audit-'));
    try {
      mkdirSync(path.join(dir, 'data'));
      const file = path.join(dir, 'data', 'ledger.sqlite');
      const write = (seq: number) => {
        const db = new Database(file);
        db.exec('CREATE TABLE IF NOT EXISTS ledger_entries (chain_id TEXT NOT NULL, entry TEXT NOT NULL)');
        db.prepare('INSERT INTO ledger_entries (chain_id, entry) VALUES (?, ?)').run('run-1', JSON.stringify(real(seq)));
        db.close();
      };
      write(1);
      await expect(auditSqliteLedgersUnder(dir)).resolves.toBeUndefined();
      write(3);
      const failure = await auditSqliteLedgersUnder(dir).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(LedgerAuditFailure);
      expect((failure as Error).message).toMatch(
        /data\/ledger\.sqlite breaks its invariants[\s\S]*N-24 datum\/N-24\/gen-12 \(chain run-1\) seq 3: SEQ: seq 3 is entry 2/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
