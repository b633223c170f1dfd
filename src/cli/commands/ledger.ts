import { openLedgerStore, type LedgerStore } from '../../activities/ledger-store';
import { parseDuration } from '../../domain/duration';
import type { LedgerEntry } from '../../domain';
import { UsageError, outputFormat, wholeFlag, type OutputFlags, type OutputFormat } from '../args';
import { withFix } from '../errors';
import { checkNode } from '../nodes';
import { print, printDocument, printLine, table } from '../output';
import type { CommandModule } from '../command';
import { dataDirFrom } from '../dirs';
import { untilStopped } from '../process';

interface LedgerRaw extends OutputFlags {
  node: string;
  since?: string;
  limit?: string;
  data?: string;
  follow?: boolean;
}

export interface LedgerInput {
  node: string;
  format: OutputFormat;
  /** An ISO time as typed (the store checks it), or the instant a duration ago. */
  since: string | undefined;
  limit: number | null;
  dataDir: string;
  follow: boolean;
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const ZONED_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** --since 1h is a duration back from now; 2026-11-29 or 2026-11-29T10:00:00Z a time (the store normalizes it). */
export function sinceFrom(text: string | undefined, now = Date.now()): string | undefined {
  if (text === undefined) return undefined;
  const ago = parseDuration(text);
  if (ago !== null) return new Date(now - ago).toISOString();
  if ((DATE.test(text) || ZONED_TIME.test(text)) && Number.isFinite(Date.parse(text))) return text;
  throw new UsageError(
    withFix(
      `--since ${JSON.stringify(text)} is neither a time nor a duration`,
      'give an ISO 8601 time with a zone (2026-11-29T10:00:00Z), a date (2026-11-29) or how long ago (90m, 1h, 2d)',
    ),
  );
}

export const ledgerCommand: CommandModule<LedgerRaw, LedgerInput> = {
  input(values) {
    const format = outputFormat(values);
    if (values.follow && format === 'json')
      throw new UsageError(
        withFix('--follow prints entries as they come, which one JSON document cannot', 'use -o jsonl (one entry a line)'),
      );
    return {
      node: checkNode(values.node),
      format,
      since: sinceFrom(values.since),
      limit: values.limit === undefined ? null : wholeFlag(values.limit, '--limit', '50'),
      dataDir: dataDirFrom(values.data),
      follow: values.follow === true,
    };
  },
  async run({ node, format, since, limit, dataDir, follow }) {
    const store = await openLedgerStore({ dataDir });
    try {
      const all = await store.list(node, since ? { since } : {});
      // The newest N, still oldest first: what `tail` would show.
      const entries = limit === null ? all : all.slice(-limit);
      if (format === 'json') printDocument('json', entries);
      else if (format === 'jsonl') for (const e of entries) printLine(e);
      else if (entries.length === 0)
        print(`No ledger entries for ${node} in ${store.location}${since ? ` since ${since}` : ''}.`);
      else print(ledgerTable(entries));
      if (follow) await followLedger(store, node, all, format);
      return 0;
    } finally {
      await store.close();
    }
  },
};

/** How often --follow asks the store for entries after the last one it printed. */
const FOLLOW_EVERY_MS = 1000;

const entryKey = (e: LedgerEntry) => `${e.workflow_id}#${e.seq}@${e.decided_at}`;

/** Prints each entry the store takes from now on, one line (or one JSON object) each, until Ctrl-C. */
async function followLedger(store: LedgerStore, node: string, shown: LedgerEntry[], format: OutputFormat): Promise<void> {
  const run = untilStopped();
  const seen = new Set(shown.map(entryKey));
  let after = shown.length > 0 ? shown[shown.length - 1].decided_at : undefined;
  if (format === 'text') print(`Following ${node}'s ledger in ${store.location}; Ctrl-C stops.`);
  while (!run.stopped()) {
    for (const e of await store.list(node, after ? { since: after } : {})) {
      if (seen.has(entryKey(e))) continue;
      seen.add(entryKey(e));
      after = e.decided_at;
      if (format === 'text') print(entryLine(e));
      else printLine(e);
    }
    await run.sleep(FOLLOW_EVERY_MS);
  }
}

/** One entry on one line, as --follow prints it. */
function entryLine(e: LedgerEntry): string {
  return `${e.decided_at}  gen ${e.desired_generation}  #${e.seq}  ${e.convergence_status}/${e.reason}  ${detailOf(e)}`;
}

/** The entry's sentence, led by the hold it was decided under (every entry during a hold says so). */
function detailOf(e: LedgerEntry): string {
  return e.hold ? `[held by ${e.hold.by}${e.hold.until ? ` until ${e.hold.until}` : ''}] ${e.reason_detail}` : e.reason_detail;
}

/**
 * The desired state's revision the entry was decided under, short: its git commit and the commit's
 * author (without the address), or the file's sha256 when it was not a clean commit.
 */
function revisionOf(e: LedgerEntry): string {
  const p = e.desired_provenance;
  if (!p) return '-';
  const [kind, id] = p.revision.split(':', 2);
  const short = id === undefined ? p.revision : `${kind}:${id.slice(0, 12)}`;
  return p.author ? `${short} ${p.author.replace(/ <[^>]*>$/, '')}` : short;
}

function ledgerTable(entries: LedgerEntry[]): string {
  return table(
    ['DECIDED', 'GEN', 'REVISION', 'SEQ', 'STATUS', 'REASON', 'ACTIONS', 'DETAIL'],
    entries.map((e) => [
      e.decided_at,
      String(e.desired_generation),
      revisionOf(e),
      String(e.seq),
      e.convergence_status,
      e.reason,
      e.execution_evidence.map((x) => `${x.resource_key}:${x.action}=${x.outcome}`).join(', ') || '-',
      detailOf(e),
    ]),
  );
}
