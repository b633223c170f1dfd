import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import * as tar from 'tar';
import { z } from 'zod';
import { releaseSpec, type Json, type ObservedResource, type ReleaseSpec } from '../../domain';
import { atomicWriteJson, fsyncDir, readJsonOrNull, sha256File, tempName } from '../fsx';
import { ABSENT_MARKER, linkMarker, obstructionMarker } from '../markers';
import { createParents, datumPath, isErrno, isInside, kindOf, locateIn, lstatOrNull } from '../paths';
import { withFix } from '../../contract';
import { AgentRefusal } from '../refusal';
import { RECORD, fetchArtifact, inspectArchive, normalizeEntryPath } from './artifact';
import { observed, short, type ApplyResult, type AtWrite, type NodeContext } from './types';

/*
 * release: <root>/releases/<version>/ holds an unpacked artifact and its record
 * (.datum-release.json = {version, sha256}); <root>/current is a symlink to releases/<version>.
 * Observed value: the record of the release `current` points at. Marker: the symlink's target
 * and ctime. Releases are never deleted; a releases/<version> that is not the one desired
 * (another digest, no record) is an obstruction, because replacing it would destroy it. The
 * artifact is fetched and its archive judged in artifact.ts before anything is unpacked here.
 */

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
