import { withFix } from '../../contract';
import { lstatAt, type HeldDir, inDatumDir } from '../fs';
import { limits } from '../limits';
import { AgentRefusal } from '../refusal';

/*
 * Retention of the idempotency journal (<root>/.datum/journal/<key>.json, one small file per
 * applied action). What must be kept, and why:
 *   - fence.json is never pruned: fencing needs the newest generation accepted, forever.
 *   - A journal entry is needed only while the same apply can still arrive again (same
 *     idempotency_key, observed_marker and action_seq): Temporal's retries of one apply, at most
 *     3 attempts of 10 min each. A later pass plans a new action_seq and never looks it up.
 * So entries older than JOURNAL_RETAIN_MS go, and at MAX_JOURNAL_ENTRIES the oldest go as long
 * as they are older than JOURNAL_MIN_AGE_MS. A journal still full after that (more applies in
 * an hour than the cap) refuses new actions rather than forget what replay needs.
 * Entries are aged by their file's mtime: each is written once and never rewritten.
 */

const sinceFullScan = new Map<string, number>();
/** A full scan (one lstat per entry) runs on the first apply of a root, then every this many. */
const SCAN_EVERY = 100;

/** Prunes the journal under `root` (a real path); returns how many entries are left. */
export async function pruneJournal(root: string, now: Date): Promise<number> {
  return await inDatumDir(root, 'journal', true, (dir) => pruneIn(dir, now), 0);
}

async function pruneIn(dir: HeldDir, now: Date): Promise<number> {
  const names = (await dir.entries()).filter((n) => n.endsWith('.json') && !n.startsWith('.'));
  const aged: Array<{ name: string; age: number }> = [];
  for (const name of names) {
    const st = await lstatAt(dir, name).catch(() => null);
    if (st !== null) aged.push({ name, age: now.getTime() - st.mtimeMs });
  }
  aged.sort((a, b) => b.age - a.age); // oldest first
  let left = aged.length;
  for (const { name, age } of aged) {
    const expired = age > limits.journalRetainMs;
    const excess = left >= limits.journalEntries && age > limits.journalMinAgeMs; // leave room for one more
    if (!expired && !excess) break; // everything after this one is younger still
    await dir.remove(name);
    left--;
  }
  return left;
}

/**
 * Called before an action is carried out (never for a replay): prunes when due, and refuses the
 * action when the journal has no room for its entry.
 */
export async function assertJournalRoom(root: string, now: Date): Promise<void> {
  const count = sinceFullScan.get(root);
  let left: number;
  if (count === undefined || count >= SCAN_EVERY) {
    left = await pruneJournal(root, now);
    sinceFullScan.set(root, 0);
  } else {
    sinceFullScan.set(root, count + 1);
    left = await inDatumDir(root, 'journal', true, async (dir) => (await dir.entries()).length, 0);
    if (left >= limits.journalEntries) left = await pruneJournal(root, now);
  }
  if (left < limits.journalEntries) return;
  throw new AgentRefusal(
    'SizeLimitExceeded',
    withFix(
      `the agent's journal (.datum/journal) holds ${left} entries younger than ${limits.journalMinAgeMs / 60_000} min, the most it keeps (MAX_JOURNAL_ENTRIES); recording another could drop one a retry still needs`,
      'something is sending far more actions than a node needs: find the loop doing it; entries age out on their own',
    ),
    { entries: left, cap: limits.journalEntries },
  );
}
