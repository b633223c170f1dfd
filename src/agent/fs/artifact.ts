import { createReadStream, constants, promises as fs } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { checkpoint } from './cancel';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import * as tar from 'tar';
import { withFix } from '../../contract';
import { clip } from '../../domain/bounds';
import { NotRegularFile, openRegular, type HeldDir } from './held';
import { bytes as sized, limits } from '../limits';
import { AgentRefusal } from '../refusal';

/*
 * A release's artifact before it is unpacked (src/agent/fs/releases.ts unpacks it): fetched into a
 * held directory of the agent's own (.datum/tmp) under MAX_ARTIFACT_BYTES (neither a server's
 * Content-Length nor a file's size is trusted alone, and a FIFO at the path is refused, not
 * waited on), and every entry of the archive judged before a single one is extracted.
 */

/** The record Datum writes into each release directory; no archive entry may take its name. */
export const RECORD = '.datum-release.json';

/** An archive by path, or by a descriptor (read from its start each time; the caller closes it). */
export type ArchiveSource = string | FileHandle;

export const readFrom = (file: ArchiveSource) =>
  typeof file === 'string' ? createReadStream(file) : file.createReadStream({ start: 0, autoClose: false });

/** Copies the artifact (an http(s) URL or an absolute path on the node) to `name` in `dir`, under its cap. */
export async function fetchArtifact(artifact: string, dir: HeldDir, name: string): Promise<void> {
  const into = async () => {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
    return (await fs.open(dir.at(name), flags, 0o600)).createWriteStream();
  };
  const unavailable = (why: string, fix: string) =>
    new AgentRefusal('ArtifactUnavailable', withFix(`artifact ${artifact} ${why}`, fix), { artifact });
  if (/^https?:\/\//i.test(artifact)) {
    let res: Response;
    try {
      res = await fetch(artifact, { redirect: 'follow', signal: AbortSignal.timeout(300_000) });
    } catch (err) {
      // A network error may pass: an ordinary (retryable) error, not a refusal.
      throw new Error(
        `fetching artifact ${artifact} failed: ${(err as Error).message}${(err as Error).cause ? ` (${String((err as Error).cause)})` : ''}`,
      );
    }
    if (!res.ok || res.body === null) {
      if ([400, 401, 403, 404, 410].includes(res.status))
        throw unavailable(
          `answered HTTP ${res.status}`,
          'publish the artifact at that URL, or correct artifact in the desired state',
        );
      throw new Error(`fetching artifact ${artifact} answered HTTP ${res.status}`);
    }
    const declared = Number(res.headers.get('content-length') ?? NaN);
    if (declared > limits.artifactBytes) throw tooLarge(artifact, declared);
    await pipeline(Readable.fromWeb(res.body as WebReadableStream<Uint8Array>), capBytes(artifact), await into());
    return;
  }
  if (!path.isAbsolute(artifact)) {
    throw new AgentRefusal(
      'InvalidAction',
      withFix(
        `artifact "${artifact}" is a relative path, which the agent cannot resolve`,
        'the controller resolves artifact paths against the fleet directory; send an absolute path or an http(s) URL',
      ),
    );
  }
  // Opened without blocking and judged by what was opened: a FIFO at that path is refused, not waited on.
  const opened = await openRegular(artifact, artifact, true).catch((err: unknown) => err as Error);
  if (opened instanceof NotRegularFile) throw unavailable('is not a regular file', 'point artifact at the .tgz file itself');
  if (opened instanceof Error)
    throw unavailable(
      `cannot be read (${(opened as NodeJS.ErrnoException).code ?? opened.message})`,
      'put the artifact at that path on the node, or correct artifact in the desired state',
    );
  const { handle, st } = opened;
  try {
    if (st.size > limits.artifactBytes) throw tooLarge(artifact, st.size);
    await pipeline(handle.createReadStream({ autoClose: false }), capBytes(artifact), await into());
  } finally {
    await handle.close();
  }
}

function tooLarge(artifact: string, size: number | null): AgentRefusal {
  const found = size === null ? 'more than' : `${sized(size)}, more than`;
  return new AgentRefusal(
    'SizeLimitExceeded',
    withFix(
      `artifact ${artifact} is ${found} the ${sized(limits.artifactBytes)} the agent downloads (MAX_ARTIFACT_BYTES); nothing was unpacked`,
      'publish a smaller artifact (leave data sets out of releases)',
    ),
    { artifact, cap: limits.artifactBytes },
  );
}

/** Passes bytes through until MAX_ARTIFACT_BYTES, then fails: a server's Content-Length is not trusted. */
function capBytes(artifact: string): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      // An attempt that is over stops its download or copy here (src/agent/fs/cancel.ts).
      try {
        checkpoint();
      } catch (err) {
        return done(err as Error);
      }
      done(seen > limits.artifactBytes ? tooLarge(artifact, null) : null, chunk);
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Archive inspection: every entry is judged before a single one is extracted.

const EXTRACTABLE = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

/** An entry path with "." segments and trailing slashes dropped; refusal reason when it can leave. */
export function normalizeEntryPath(raw: string): { path: string; outside: string | null } {
  if (raw.startsWith('/') || /^[A-Za-z]:/.test(raw)) return { path: raw, outside: 'is absolute' };
  if (raw.includes('\0')) return { path: raw, outside: 'contains a NUL byte' };
  const segments = raw.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) return { path: raw, outside: 'has a ".." segment' };
  return { path: segments.join('/'), outside: null };
}

/**
 * Lists the archive and checks every entry: a plain relative name, a type a release may hold,
 * no entry below a symlink of the archive, a hardlink to a name inside the archive, a symlink
 * whose target stays inside the release directory. Returns the allowed (path → type) map that
 * extraction filters on. Throws PathOutsideRoot / InvalidAction / ArtifactUnavailable.
 */
export async function inspectArchive(file: ArchiveSource): Promise<Map<string, string>> {
  const entries = await listArchive(file);
  const { allowed, symlinks } = admitEntries(entries);
  for (const e of entries) checkLinks(e, symlinks);
  return allowed;
}

interface ArchiveEntry {
  path: string;
  type: string;
  linkpath?: string;
}

/**
 * Lists the archive's entries, stopping as soon as it has more than MAX_ARCHIVE_ENTRIES or its
 * entries add up to more than MAX_UNPACKED_BYTES: a bomb is refused before it is unpacked, and
 * before it is even read to the end.
 */
async function listArchive(file: ArchiveSource): Promise<ArchiveEntry[]> {
  const entries: ArchiveEntry[] = [];
  let total = 0;
  // Set from the entry callback; a holder, because a `let` assigned in a closure reads as never-set.
  const stop: { over: AgentRefusal | null } = { over: null };
  const source = readFrom(file);
  const parser = tar.t({
    strict: true,
    onReadEntry: (e) => {
      if (stop.over) return;
      entries.push({ path: e.path, type: e.type, linkpath: e.linkpath });
      total += e.size ?? 0;
      if (entries.length > limits.archiveEntries)
        stop.over = archiveTooLarge(`has more than ${limits.archiveEntries} entries (MAX_ARCHIVE_ENTRIES)`);
      else if (total > limits.unpackedBytes)
        stop.over = archiveTooLarge(`would unpack to more than ${sized(limits.unpackedBytes)} (MAX_UNPACKED_BYTES)`);
      if (stop.over) source.destroy(stop.over);
    },
  });
  try {
    await pipeline(source, parser);
  } catch (err) {
    if (stop.over) throw stop.over;
    throw new AgentRefusal(
      'ArtifactUnavailable',
      withFix(
        `the artifact is not a readable tar.gz (${(err as Error).message})`,
        'publish a .tar.gz whose root holds the release files',
      ),
    );
  }
  if (stop.over) throw stop.over;
  return entries;
}

const archiveTooLarge = (why: string) =>
  new AgentRefusal(
    'SizeLimitExceeded',
    withFix(`the artifact ${why}; nothing was unpacked`, 'publish a smaller release (leave data sets out of artifacts)'),
    { cap_entries: limits.archiveEntries, cap_bytes: limits.unpackedBytes },
  );

/** An archive's names are outside input: a refusal quotes at most this much of each (the ledger keeps it). */
const ENTRY_ECHO = 200;

const outsideRelease = (entry: string, why: string) =>
  new AgentRefusal(
    'PathOutsideRoot',
    withFix(
      `archive entry "${clip(entry, ENTRY_ECHO)}" ${clip(why, ENTRY_ECHO)} and would leave the release directory; nothing was unpacked`,
      'rebuild the artifact with relative paths inside its root and symlinks that stay inside it',
    ),
    { entry: clip(entry, ENTRY_ECHO) },
  );

const invalidEntry = (entry: string, why: string) =>
  new AgentRefusal(
    'InvalidAction',
    withFix(
      `archive entry "${clip(entry, ENTRY_ECHO)}" ${clip(why, ENTRY_ECHO)}; nothing was unpacked`,
      'rebuild the artifact with regular files, directories and symlinks only',
    ),
    { entry: clip(entry, ENTRY_ECHO) },
  );

/** Each entry by its own name and type: relative, of a kind a release may hold, named once. */
function admitEntries(entries: ArchiveEntry[]): { allowed: Map<string, string>; symlinks: Set<string> } {
  const allowed = new Map<string, string>();
  const symlinks = new Set<string>();
  for (const e of entries) {
    const norm = normalizeEntryPath(e.path);
    if (norm.outside) throw outsideRelease(e.path, norm.outside);
    if (!EXTRACTABLE.has(e.type)) throw invalidEntry(e.path, `is a ${e.type}`);
    if (norm.path === RECORD) throw invalidEntry(e.path, `uses the name of Datum's own release record`);
    if (norm.path === '') {
      if (e.type !== 'Directory') throw invalidEntry(e.path, 'names the archive root but is not a directory');
      continue;
    }
    const before = allowed.get(norm.path);
    if (before !== undefined && !(before === 'Directory' && e.type === 'Directory'))
      throw invalidEntry(e.path, 'appears twice in the archive');
    allowed.set(norm.path, e.type);
    if (e.type === 'SymbolicLink') symlinks.add(norm.path);
  }
  return { allowed, symlinks };
}

/** The archive's symlink that `p` lies below, if any. */
function throughSymlink(p: string, symlinks: Set<string>): string | null {
  const segments = p.split('/');
  for (let i = 1; i < segments.length; i++)
    if (symlinks.has(segments.slice(0, i).join('/'))) return segments.slice(0, i).join('/');
  return null;
}

/** No entry below a symlink of the archive, hardlinks to names inside it, symlinks that stay inside. */
function checkLinks(e: ArchiveEntry, symlinks: Set<string>): void {
  const norm = normalizeEntryPath(e.path).path;
  const via = throughSymlink(norm, symlinks);
  if (via) throw outsideRelease(e.path, `lies below the archive's symlink "${via}"`);
  if (e.type === 'Link') {
    const link = normalizeEntryPath(e.linkpath ?? '');
    if (link.outside || link.path === '')
      throw outsideRelease(e.path, `is a hardlink to "${e.linkpath}", which ${link.outside ?? 'is empty'}`);
    const linkVia = throughSymlink(link.path, symlinks);
    if (linkVia) throw outsideRelease(e.path, `is a hardlink through the archive's symlink "${linkVia}"`);
  }
  if (e.type === 'SymbolicLink') {
    const why = symlinkEscape(norm, e.linkpath ?? '', symlinks);
    if (why) throw outsideRelease(e.path, `is a symlink to "${e.linkpath}", which ${why}`);
  }
}

/**
 * Why a symlink at `entry` with `target` could resolve outside the release directory, or null.
 * Walked lexically from the link's directory; a ".." after passing through another symlink of
 * the archive is refused, because there the lexical and the real parent differ.
 */
function symlinkEscape(entry: string, target: string, symlinks: Set<string>): string | null {
  if (target === '') return 'is empty';
  if (target.startsWith('/') || /^[A-Za-z]:/.test(target)) return 'is absolute';
  const stack = entry.split('/').slice(0, -1);
  let throughLink = false;
  for (const seg of target.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') {
      if (throughLink) return 'climbs out of another symlink';
      if (stack.length === 0) return 'climbs above the release directory';
      stack.pop();
      continue;
    }
    stack.push(seg);
    if (symlinks.has(stack.join('/'))) throughLink = true;
  }
  return null;
}
