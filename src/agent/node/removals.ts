import { createHash } from 'node:crypto';
import type { RemovalResult } from '../../contract';
import { inDatumDir, openAppendAt, readJsonAt, writeJsonAt } from '../fs';
import { withLock } from './lock';

/*
 * What the agent removed, under <root>/.datum/ (docs/operations.md, "Removing things"):
 *   removals.jsonl        every target an approved removal took: when, which item, who approved
 *                         it (the declared name and the identity Temporal recorded), its bytes'
 *                         size and sha256, and where under .datum/backup/ they are kept
 *   removals/<key>.json   per approval, what it removed so far and whether it is done: a second
 *                         request of the same approval is answered from it and removes nothing
 */

export const REMOVALS_LOG = '.datum/removals.jsonl';

export interface RemovalLine {
  at: string;
  node: string;
  item: string;
  key: string;
  by: string;
  identity: string | null;
  note: string | null;
  target: string;
  path: string;
  size: number;
  sha256: string;
  backup: string;
}

/** An approval's progress: the targets removed so far; `done` once all were. */
export interface ApprovalRecord {
  key: string;
  removed: RemovalResult['removed'];
  done: { at: string } | null;
}

const recordName = (key: string) => `${createHash('sha256').update(key).digest('hex').slice(0, 32)}.json`;

export class RemovalRecords {
  constructor(private readonly root: string) {}

  /** What this approval did before; null when it never ran. */
  async lookup(key: string): Promise<ApprovalRecord | null> {
    const data = (await inDatumDir(
      this.root,
      'removals',
      false,
      (dir) => readJsonAt(dir, recordName(key)),
      null,
    )) as ApprovalRecord | null;
    return data && data.key === key && Array.isArray(data.removed) ? data : null;
  }

  /** One target removed: its line in removals.jsonl, then the approval's progress (so a retry skips it). */
  async removed(line: RemovalLine, progress: ApprovalRecord): Promise<void> {
    await withLock(`removals:${this.root}`, async () => {
      await inDatumDir(
        this.root,
        '',
        true,
        async (dir) => {
          const log = await openAppendAt(dir, 'removals.jsonl', 0o644);
          try {
            await log.write(`${JSON.stringify(line)}\n`);
            await log.sync();
          } finally {
            await log.close();
          }
        },
        undefined,
      );
      await this.save(progress);
    });
  }

  async save(progress: ApprovalRecord): Promise<void> {
    await inDatumDir(this.root, 'removals', true, (dir) => writeJsonAt(dir, recordName(progress.key), progress), undefined);
  }
}
