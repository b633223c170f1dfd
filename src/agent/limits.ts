/*
 * The agent's size caps and retention rules, one named constant each. Every cap is a second
 * line of defence: desired-state validation is the first, but the agent checks again at the
 * moment it writes, because it cannot know who sent the action. Exceeding one is refused as
 * SizeLimitExceeded with the cap, the size found and the fix in the message.
 *
 * `limits` holds the values in force. It is the constants unless a test lowers one to reach a
 * cap without writing gigabytes; production code never changes it.
 */

const MiB = 1024 * 1024;

/** A file resource's content, in bytes. Configuration files, not data sets. */
export const MAX_FILE_CONTENT_BYTES = 4 * MiB;

/**
 * A file's content that `datum import` writes into desired state, in bytes: a quarter of the
 * 256 KiB a desired-state file may hold (MAX_DESIRED_STATE_BYTES), so one imported file leaves
 * room for the node's other resources and YAML's quoting of the text. A larger file is not
 * configuration to import: it belongs in a release artifact.
 */
export const MAX_IMPORT_CONTENT_BYTES = 64 * 1024;

/** A flag's JSON document, in bytes. */
export const MAX_FLAG_BYTES = 64 * 1024;

/**
 * The previous content the agent keeps as a backup before replacing a file or flag. A larger
 * file is not replaced (the agent would have to destroy it without a copy): the operator moves it.
 */
export const MAX_BACKUP_BYTES = 16 * MiB;

/** Backups kept per target under .datum/backup/, newest first; older ones are pruned on write. */
export const BACKUPS_KEPT_PER_TARGET = 5;

/** A release artifact as downloaded or copied, in bytes (checked while it streams). */
export const MAX_ARTIFACT_BYTES = 1024 * MiB;

/** The sum of the sizes of an artifact's entries once unpacked, in bytes (a tar or gzip bomb). */
export const MAX_UNPACKED_BYTES = 4096 * MiB;

/** Entries in one artifact. */
export const MAX_ARCHIVE_ENTRIES = 100_000;

/**
 * Journal entries kept under .datum/journal/. Replay needs an entry only while the workflow can
 * still retry the same apply (same idempotency_key, observed_marker and action_seq): at most 3
 * attempts of 10 min each plus their backoff, so well under JOURNAL_MIN_AGE_MS. A later pass
 * plans with a new action_seq and never looks the old entry up. Fencing does not read the
 * journal at all (fence.json is never pruned).
 */
export const MAX_JOURNAL_ENTRIES = 10_000;

/** Entries older than this are pruned, whatever their number. */
export const JOURNAL_RETAIN_MS = 24 * 60 * 60 * 1000;

/** No entry younger than this is pruned, even past MAX_JOURNAL_ENTRIES: replay may need it. */
export const JOURNAL_MIN_AGE_MS = 60 * 60 * 1000;

/**
 * A service's log (.datum/services/<key>.log). Past this size it is rotated to <key>.log.1
 * (replacing the previous one) when the service starts and when it is observed; the service
 * appends (O_APPEND), so a copy-and-truncate rotation loses nothing it writes afterwards.
 */
export const MAX_SERVICE_LOG_BYTES = 10 * MiB;

/**
 * One of Datum's own records under .datum/ (claims, decisions, the fence, a journal entry): read
 * only up to this, judged from fstat before a byte is read. A local writer who swaps one for a huge
 * (even sparse) file gets a refusal naming it, never an agent that reads it whole.
 */
export const MAX_RECORD_BYTES = 4 * MiB;

/** A small record (a service's state and launch intent, the root's holder, a watch token, a release's record). */
export const MAX_SMALL_RECORD_BYTES = 64 * 1024;

export const limits = {
  recordBytes: MAX_RECORD_BYTES,
  smallRecordBytes: MAX_SMALL_RECORD_BYTES,
  fileContentBytes: MAX_FILE_CONTENT_BYTES,
  importContentBytes: MAX_IMPORT_CONTENT_BYTES,
  flagBytes: MAX_FLAG_BYTES,
  backupBytes: MAX_BACKUP_BYTES,
  backupsKept: BACKUPS_KEPT_PER_TARGET,
  artifactBytes: MAX_ARTIFACT_BYTES,
  unpackedBytes: MAX_UNPACKED_BYTES,
  archiveEntries: MAX_ARCHIVE_ENTRIES,
  journalEntries: MAX_JOURNAL_ENTRIES,
  journalRetainMs: JOURNAL_RETAIN_MS,
  journalMinAgeMs: JOURNAL_MIN_AGE_MS,
  serviceLogBytes: MAX_SERVICE_LOG_BYTES,
};

/** "1 TiB", "4 MiB", "512 KiB", "17 bytes": sizes as a person reads them in a refusal. */
export function bytes(n: number): string {
  const GiB = 1024 * MiB;
  if (n >= 1024 * GiB) return `${Number((n / (1024 * GiB)).toFixed(1))} TiB`;
  if (n >= GiB) return `${Number((n / GiB).toFixed(1))} GiB`;
  if (n >= MiB && n % (MiB / 16) === 0) return `${n / MiB} MiB`;
  if (n >= MiB) return `${(n / MiB).toFixed(1)} MiB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KiB`;
  return `${n} bytes`;
}
