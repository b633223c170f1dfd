import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import * as tar from 'tar';
import { z } from 'zod';
import { releaseSpec, type Json, type ObservedResource, type ReleaseSpec } from '../../domain';
import { atomicWriteJson, fsyncDir, readJsonOrNull, sha256File, tempName } from '../fsx';
import { ABSENT_MARKER, linkMarker, obstructionMarker } from '../markers';
import { bytes as sized, limits } from '../limits';
import { createParents, datumPath, isErrno, isInside, kindOf, locateIn, lstatOrNull } from '../paths';
import { withFix } from '../../contract';
import { clip } from '../../domain/bounds';
import { AgentRefusal } from '../refusal';
import { observed, short, type ApplyResult, type AtWrite, type NodeContext } from './types';

/*
 * release: <root>/releases/<version>/ holds an unpacked artifact and its record
 * (.datum-release.json = {version, sha256}); <root>/current is a symlink to releases/<version>.
 * Observed value: the record of the release `current` points at. Marker: the symlink's target
 * and ctime. Releases are never deleted; a releases/<version> that is not the one desired
 * (another digest, no record) is an obstruction, because replacing it would destroy it.
 */

export const RECORD = '.datum-release.json';
export const releaseInstallSpec = releaseSpec.omit({ type: true });
export type ReleaseInstallSpec = z.infer<typeof releaseInstallSpec>;

const releaseRecord = z.object({ version: z.string(), sha256: z.string() });
type ReleaseRecord = z.infer<typeof releaseRecord>;

type CurrentState =
  | { kind: 'absent' }
  | { kind: 'obstructed'; what: string }
  | { kind: 'link'; target: string; marker: string; release: string | null };

/** What `current` is: absent, a symlink (and to which releases/<name>, if any), or in the way. */
async function readCurrent(ctx: NodeContext): Promise<CurrentState> {
  const st = await lstatOrNull(path.join(ctx.root, 'current'));
  if (st === null) return { kind: 'absent' };
  if (!st.isSymbolicLink()) return { kind: 'obstructed', what: kindOf(st) };
  const target = await fs.readlink(path.join(ctx.root, 'current'));
  const rel = path.relative(path.join(ctx.root, 'releases'), path.resolve(ctx.root, target));
  const release = rel && !rel.startsWith('..') && !path.isAbsolute(rel) && !rel.includes(path.sep) ? rel : null;
  return { kind: 'link', target, marker: linkMarker(target, st.ctimeMs), release };
}

type ReleaseDirState = { kind: 'absent' } | { kind: 'recorded'; record: ReleaseRecord } | { kind: 'obstructed'; why: string };

/** releases/<version>: absent, a recorded release, or something Datum cannot reuse or replace. */
async function readReleaseDir(ctx: NodeContext, version: string): Promise<ReleaseDirState> {
  const loc = await locateIn(ctx.root, `releases/${version}/${RECORD}`, 'release path', 'releases');
  const dir = path.dirname(loc.abs);
  const st = await lstatOrNull(dir);
  if (st === null) return { kind: 'absent' };
  if (!st.isDirectory()) return { kind: 'obstructed', why: `releases/${version} is a ${kindOf(st)}, not a release directory` };
  const raw = await readJsonOrNull(loc.abs).catch((err: Error) => ({ unreadable: err.message }));
  const parsed = releaseRecord.safeParse(raw);
  if (!parsed.success)
    return {
      kind: 'obstructed',
      why: `releases/${version} exists without a readable ${RECORD}, so Datum cannot tell what it holds`,
    };
  return { kind: 'recorded', record: parsed.data };
}

export async function observeRelease(ctx: NodeContext, spec: Pick<ReleaseSpec, 'version' | 'sha256'>): Promise<ObservedResource> {
  const detail: Record<string, Json> = {};
  let obstruction: string | null = null;
  try {
    const desiredDir = await readReleaseDir(ctx, spec.version);
    detail.desired_release_dir = desiredDir.kind;
    if (desiredDir.kind === 'obstructed') obstruction = `${desiredDir.why}; installing ${spec.version} would replace it`;
    else if (desiredDir.kind === 'recorded' && desiredDir.record.sha256 !== spec.sha256) {
      obstruction = `releases/${spec.version} already holds an artifact with sha256 ${desiredDir.record.sha256}, not the desired ${spec.sha256}; installing would replace it`;
    }
  } catch (err) {
    if (!(err instanceof AgentRefusal)) throw err;
    obstruction = err.message;
  }

  const current = await readCurrent(ctx);
  if (current.kind === 'absent') return observed('release', null, ABSENT_MARKER, { ...detail, current: null }, obstruction);
  if (current.kind === 'obstructed') {
    const st = await fs.lstat(path.join(ctx.root, 'current'));
    return observed(
      'release',
      null,
      obstructionMarker(current.what, st),
      { ...detail, current: current.what },
      `"current" is a ${current.what}, not a symlink; switching it would destroy it`,
    );
  }
  detail.current = current.target;
  if (current.release === null) {
    detail.problem = `current points at ${current.target}, which is not a release under releases/`;
    return observed('release', null, current.marker, detail, obstruction);
  }
  let dir: ReleaseDirState;
  try {
    dir = await readReleaseDir(ctx, current.release);
  } catch (err) {
    if (!(err instanceof AgentRefusal)) throw err;
    return observed('release', null, current.marker, { ...detail, problem: err.message }, obstruction);
  }
  if (dir.kind === 'absent')
    return observed(
      'release',
      null,
      current.marker,
      { ...detail, problem: `current points at releases/${current.release}, which does not exist` },
      obstruction,
    );
  if (dir.kind === 'obstructed')
    return observed(
      'release',
      { version: current.release, sha256: null },
      current.marker,
      { ...detail, problem: dir.why },
      obstruction,
    );
  return observed('release', { version: dir.record.version, sha256: dir.record.sha256 }, current.marker, detail, obstruction);
}

/**
 * The switch of `current` runs through `atWrite`, after a fetch that may take minutes: the agent
 * re-checks there, at the switch itself, its fence and what the plan saw (freshness, the marker
 * of `current`). A refused switch leaves the fetched release unpacked under releases/ (a retry
 * or a newer generation that wants it reuses it) and `current` where it was.
 */
export async function applyReleaseInstall(
  ctx: NodeContext,
  resourceKey: string,
  spec: ReleaseInstallSpec,
  atWrite: AtWrite,
): Promise<ApplyResult> {
  // Obstructions first: nothing is fetched for an install that could only destroy something.
  const current = await readCurrent(ctx);
  if (current.kind === 'obstructed') {
    throw new AgentRefusal(
      'DestructiveActionRefusal',
      withFix(
        `"current" is a ${current.what}, not a symlink, and switching it would destroy it`,
        'move "current" away by hand; Datum only ever replaces a symlink there',
      ),
    );
  }
  const existing = await readReleaseDir(ctx, spec.version);
  if (existing.kind === 'obstructed') {
    throw new AgentRefusal(
      'DestructiveActionRefusal',
      withFix(
        `${existing.why}, and Datum never replaces a release`,
        `move releases/${spec.version} away by hand if it is not needed`,
      ),
    );
  }
  if (existing.kind === 'recorded' && existing.record.sha256 !== spec.sha256) {
    throw new AgentRefusal(
      'DestructiveActionRefusal',
      withFix(
        `releases/${spec.version} already holds sha256 ${existing.record.sha256}, not ${spec.sha256}, and Datum never replaces a release`,
        'publish the new artifact under a new version, or move the old directory away by hand',
      ),
    );
  }

  let how: string;
  if (existing.kind === 'recorded') {
    how = `reused releases/${spec.version} (already unpacked, sha256 ${short(spec.sha256)})`;
  } else {
    await installFromArtifact(ctx, spec);
    how = `unpacked ${spec.artifact} (sha256 ${short(spec.sha256)} verified) into releases/${spec.version}`;
  }
  const marker = await atWrite(() => switchCurrent(ctx, spec.version));
  const from = current.kind === 'link' ? current.target : 'nothing';
  return { marker_after: marker, detail: `${how} and switched current from ${from} to releases/${spec.version}.` };
}

async function installFromArtifact(ctx: NodeContext, spec: ReleaseInstallSpec): Promise<void> {
  const download = await datumPath(ctx.root, `tmp/artifact-${randomBytes(6).toString('hex')}.tgz`);
  try {
    await fetchArtifact(spec.artifact, download);
    // The digest is checked on the local copy, and the same copy is unpacked: the bytes that
    // verified are the bytes that land.
    const actual = await sha256File(download);
    if (actual !== spec.sha256) {
      throw new AgentRefusal(
        'ArtifactDigestMismatch',
        withFix(
          `${spec.artifact} has sha256 ${actual}, but desired state expects ${spec.sha256}; nothing was unpacked`,
          'publish the right artifact, or correct sha256 in the desired state',
        ),
        { expected_sha256: spec.sha256, actual_sha256: actual },
      );
    }
    const allowed = await inspectArchive(download);
    const releasesLoc = await locateIn(ctx.root, `releases/${spec.version}`, 'release path', 'releases');
    await createParents(releasesLoc);
    const staging = path.join(releasesLoc.dir, tempName(spec.version));
    await fs.mkdir(staging);
    try {
      await tar.x({
        file: download,
        cwd: staging,
        strict: true,
        preserveOwner: false,
        filter: (p, entry) => 'type' in entry && allowed.get(normalizeEntryPath(p).path) === entry.type,
        // No setuid/setgid/sticky bits from an artifact, even when the agent runs as root.
        onReadEntry: (entry) => {
          if (entry.mode !== undefined) entry.mode &= 0o777;
        },
      });
      await atomicWriteJson(path.join(staging, RECORD), { version: spec.version, sha256: spec.sha256 });
      await fsyncDir(staging);
      await fs.rename(staging, releasesLoc.abs);
    } catch (err) {
      // Only our own staging directory is removed; an existing release is never touched.
      await fs.rm(staging, { recursive: true, force: true });
      if (!isErrno(err, 'ENOTEMPTY') && !isErrno(err, 'EEXIST')) throw err;
      const raced = await readReleaseDir(ctx, spec.version);
      if (raced.kind !== 'recorded' || raced.record.sha256 !== spec.sha256) throw err;
    }
    await fsyncDir(releasesLoc.dir);
  } finally {
    await fs.rm(download, { force: true });
  }
}

/** Atomic switch: a new symlink under a temp name, renamed over `current`. */
async function switchCurrent(ctx: NodeContext, version: string): Promise<string> {
  const target = `releases/${version}`;
  const tmp = path.join(ctx.root, tempName('current'));
  await fs.symlink(target, tmp);
  try {
    await fs.rename(tmp, path.join(ctx.root, 'current'));
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fsyncDir(ctx.root);
  const st = await fs.lstat(path.join(ctx.root, 'current'));
  return linkMarker(await fs.readlink(path.join(ctx.root, 'current')), st.ctimeMs);
}

async function fetchArtifact(artifact: string, into: string): Promise<void> {
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
    await pipeline(
      Readable.fromWeb(res.body as WebReadableStream<Uint8Array>),
      capBytes(artifact),
      createWriteStream(into, { flags: 'wx' }),
    );
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
  const st = await fs.stat(artifact).catch((err: NodeJS.ErrnoException) => err);
  if (st instanceof Error)
    throw unavailable(
      `cannot be read (${st.code ?? st.message})`,
      'put the artifact at that path on the node, or correct artifact in the desired state',
    );
  if (!st.isFile()) throw unavailable('is not a regular file', 'point artifact at the .tgz file itself');
  if (st.size > limits.artifactBytes) throw tooLarge(artifact, st.size);
  await pipeline(createReadStream(artifact), capBytes(artifact), createWriteStream(into, { flags: 'wx' }));
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
export async function inspectArchive(file: string): Promise<Map<string, string>> {
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
async function listArchive(file: string): Promise<ArchiveEntry[]> {
  const entries: ArchiveEntry[] = [];
  let total = 0;
  // Set from the entry callback; a holder, because a `let` assigned in a closure reads as never-set.
  const stop: { over: AgentRefusal | null } = { over: null };
  const source = createReadStream(file);
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

/** The real path of the current release directory, refused when it is absent or outside the root. */
export async function currentReleaseDir(ctx: NodeContext): Promise<string> {
  const current = path.join(ctx.root, 'current');
  let real: string;
  try {
    real = await fs.realpath(current);
  } catch (err) {
    if (!isErrno(err, 'ENOENT')) throw err;
    throw new AgentRefusal(
      'ServiceStartFailed',
      withFix(
        `there is no current release (${current} is absent or dangling)`,
        'install the release this service runs first; Datum orders release.install before service actions',
      ),
    );
  }
  if (!isInside(ctx.root, real) || real === ctx.root) {
    throw new AgentRefusal(
      'PathOutsideRoot',
      withFix(
        `current resolves to ${real}, outside the node's releases`,
        'let Datum switch current to a release under releases/',
      ),
      { current: real },
    );
  }
  return real;
}
