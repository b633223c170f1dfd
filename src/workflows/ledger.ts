/*
 * Recording a decision: into the workflow's ledger tail, its metrics and search attributes, then
 * into the fleet-wide ledger store. The rules of what is written are the domain's (shouldWrite,
 * verifiedAt); this is where they are carried out.
 */
import { ActivityFailure, ApplicationFailure, log, proxyLocalActivities } from '@temporalio/workflow';
import {
  LEDGER_VERSION,
  ledgerView,
  noteDecision,
  shouldWrite,
  verifiedAt,
  type BoundIntent,
  type Decision,
  type History,
  type LedgerEntry,
  type RecordKind,
} from '../domain';
import { LEDGER_PERMANENT_ERRORS, WORKFLOW_PATCH, type ControlActivities, type ReconcileCarry } from '../contract';
import { publishDecision, publishVerified, type AttributeWriter } from './attributes';
import { decisionRecorded, ledgerBacklog, passJudged } from './metrics';
import { inForce } from './patches';
import { summaryLine } from './summaries';

/** The workflow's clock (replayed as it was), as the ledger writes times. */
export const nowIso = () => new Date(Date.now()).toISOString();

/** The recheck trigger of a note whose pass follows at once (a resolution, a re-bind, a hold's end). */
export const PASS_FOLLOWS_NOW = { trigger: 'FRESH_OBSERVATION', not_before: null, detail: 'the pass that follows now' } as const;

/** Ledger entries kept in the workflow and carried across continue-as-new (the store keeps all). */
export const LEDGER_TAIL = 50;

/** What the loop has recorded, and what the store has not taken yet. */
export interface LedgerState {
  /** Recorded entries kept in the workflow (the store keeps all), oldest first. */
  entries: LedgerEntry[];
  nextSeq: number;
  lastVerifiedAt: string | null;
  lastFingerprint: string | null;
  /** Entries the ledger store has not confirmed yet, oldest first. */
  unstored: LedgerEntry[];
}

export function openLedger(carry: ReconcileCarry | null): LedgerState {
  return {
    entries: carry?.ledger_tail ?? [],
    nextSeq: carry?.next_seq ?? 1,
    lastVerifiedAt: carry?.last_verified_at ?? null,
    lastFingerprint: carry?.last_fingerprint ?? null,
    unstored: carry?.unstored ?? [],
  };
}

/** The part of the loop that recording reads and moves. */
export interface Recorder {
  readonly node: string;
  readonly workflowId: string;
  /** The first run's id: the ledger store's key for this run chain. */
  readonly chainId: string;
  readonly intent: BoundIntent;
  history: History;
  /** The last pass's or note's decision, written or not (a steady pass is not): it times the next pass. */
  lastDecision: Decision | null;
  readonly ledger: LedgerState;
  readonly attributes: AttributeWriter;
}

/** A decision the loop made between passes (a signal handled, a hand-over): always written. */
export function note(loop: Recorder, n: Parameters<typeof noteDecision>[3]): void {
  const r = noteDecision(loop.intent, loop.lastDecision, loop.history, n, nowIso(), inForce);
  loop.history = r.history;
  record(loop, r.decision, 'note');
}

export function record(loop: Recorder, decision: Decision, kind: RecordKind): void {
  const now = nowIso();
  const ledger = loop.ledger;
  // Before the loop remembers it: the latencies compare it with the decisions before.
  if (kind === 'pass') passJudged(decision, now, { lastDecision: loop.lastDecision, ledger: ledger.entries });
  ledger.lastVerifiedAt = verifiedAt(decision, now, ledger.lastVerifiedAt);
  loop.lastDecision = decision;
  const { write, fingerprint } = shouldWrite(decision, kind, ledger.lastFingerprint);
  if (!write) return publishVerified(loop.attributes, ledger.lastVerifiedAt);
  ledger.lastFingerprint = fingerprint;
  const entry: LedgerEntry = {
    // File contents stay out of the ledger: it keeps their digest and size (src/domain/redact.ts).
    ...ledgerView(decision, loop.intent),
    ledger_version: LEDGER_VERSION,
    seq: ledger.nextSeq++,
    decided_at: now,
    workflow_id: loop.workflowId,
  };
  ledger.entries.push(entry);
  ledger.unstored.push(entry);
  if (ledger.entries.length > LEDGER_TAIL * 2) ledger.entries = ledger.entries.slice(-LEDGER_TAIL);
  decisionRecorded(decision);
  publishDecision(loop.attributes, decision, ledger.lastVerifiedAt);
}

const store = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: {
    initialInterval: '1s',
    maximumInterval: '10s',
    maximumAttempts: 5,
    nonRetryableErrorTypes: [...LEDGER_PERMANENT_ERRORS],
  },
});

/**
 * Appends recorded entries to the fleet-wide store, oldest first. An entry the store could not
 * take stays queued (and is carried across continue-as-new): the loop never stops for the
 * store, and nothing recorded is dropped.
 */
export async function flushLedger(loop: Pick<Recorder, 'node' | 'chainId' | 'ledger'>): Promise<void> {
  await flushEntries(loop);
  ledgerBacklog(loop.ledger.unstored.length);
}

async function flushEntries({ node, chainId, ledger }: Pick<Recorder, 'node' | 'chainId' | 'ledger'>): Promise<void> {
  for (let entry = ledger.unstored[0]; entry; entry = ledger.unstored[0]) {
    try {
      await store.appendLedger.executeWithOptions({ summary: summaryLine(`append ledger ${node} #${entry.seq}`) }, [
        { entry, chain_id: chainId },
      ]);
      ledger.unstored.shift();
    } catch (error) {
      if (isSeqConflict(error) && inForce(WORKFLOW_PATCH.ledgerSeqConflictMovesOn)) {
        // The store holds another decision under this seq for good (retrying cannot change it):
        // its record stands, and this one must not hold back every later entry of the chain.
        log.error('ledger store holds a different entry under this seq; the later entries go on', {
          seq: entry.seq,
          error: String(error),
        });
        ledger.unstored.shift();
        continue;
      }
      // The backlog is what an operator watches: entries decided and not yet in the fleet-wide store.
      log.warn('ledger store did not take an entry; it stays queued', {
        seq: entry.seq,
        backlog: ledger.unstored.length,
        error: String(error),
      });
      return;
    }
  }
}

function isSeqConflict(error: unknown): boolean {
  const cause = error instanceof ActivityFailure ? error.cause : error;
  return cause instanceof ApplicationFailure && cause.type === 'LedgerSeqConflict';
}
