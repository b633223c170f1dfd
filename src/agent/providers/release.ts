import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';
import { type Json, type ObservedResource, type ReleaseSpec } from '../../domain';
import {
  pathStamp,
  readLink,
  RECORD,
  fetchArtifact,
  inspectArchive,
  readJsonAt,
  sha256Handle,
  DirectorySwapped,
  lstatAt,
  openRegular,
  type Identity,
  switchCurrent,
  openReleases,
  unpackRelease,
  inDatumDir,
  isInside,
  kindOf,
  locateIn,
  lstatOrNull,
} from '../fs';
import { limits } from '../limits';
import { ABSENT_MARKER, linkMarker, obstructionMarker } from '../markers';
import { withFix } from '../../contract';
import { AgentRefusal, SERVICE_START_FAILED } from '../refusal';
import {
  observeGuarded,
  observed,
  short,
  specOf,
  type ApplyResult,
  type AtWrite,
  type NodeContext,
  type Provider,
} from './types';
import { releaseSpec } from '../../schemas';

/*
 * release: <root>/releases/<version>/ holds an unpacked artifact and its record
 * (.datum-release.json = {version, sha256}); <root>/current is a symlink to releases/<version>.
 * Observed value: the record of the release `current` points at. Marker: the symlink's target
 * and ctime. Releases are never deleted; a releases/<version> that is not the one desired
 * (another digest, no record) is an obstruction, because replacing it would destroy it.
 */

export { RECORD };
export const releaseInstallSpec = releaseSpec.omit({ type: true });
export type ReleaseInstallSpec = z.infer<typeof releaseInstallSpec>;

const releaseRecord = z.object({ version: z.string(), sha256: z.string() });
type ReleaseRecord = z.infer<typeof releaseRecord>;

export const releaseProvider: Provider<ReleaseSpec> = {
  actions: ['release.install'],
  destructive: ['release.delete'],
  observe: (ctx, _key, spec) => observeRelease(ctx, spec),
  apply: (ctx, action, atWrite) => applyReleaseInstall(ctx, action.resource_key, specOf(action, releaseInstallSpec), atWrite),
  targetNow: (ctx, action) => observeRelease(ctx, specOf(action, releaseInstallSpec)),
  watch: {
    marker: (root) => pathStamp(path.join(root, 'current')),
    dirs: (root) => [root],
  },
};

type CurrentState =
  | { kind: 'absent' }
  | { kind: 'obstructed'; what: string; marker: string }
  | { kind: 'link'; target: string; marker: string; release: string | null };

/** What `current` is: absent, a symlink (and to which releases/<name>, if any), or in the way. */
async function readCurrent(ctx: NodeContext): Promise<CurrentState> {
  const st = await lstatOrNull(path.join(ctx.root, 'current'));
  if (st === null) return { kind: 'absent' };
  if (!st.isSymbolicLink()) return { kind: 'obstructed', what: kindOf(st), marker: obstructionMarker(kindOf(st), st) };
  const target = await readLink(path.join(ctx.root, 'current'));
  const rel = path.relative(path.join(ctx.root, 'releases'), path.resolve(ctx.root, target));
  const release = rel && !rel.startsWith('..') && !path.isAbsolute(rel) && !rel.includes(path.sep) ? rel : null;
  return { kind: 'link', target, marker: linkMarker(target, st.ctimeMs), release };
}

type ReleaseDirState =
  { kind: 'absent' } | { kind: 'recorded'; record: ReleaseRecord; id: Identity } | { kind: 'obstructed'; why: string };

/**
 * releases/<version>: absent, a recorded release, or something Datum cannot reuse or replace.
 * Only a real directory in a real releases/ counts: both are opened without following a
 * symlink, and the record is read without blocking (a FIFO there is not a record).
 */
async function readReleaseDir(ctx: NodeContext, version: string): Promise<ReleaseDirState> {
  const loc = await locateIn(ctx.root, `releases/${version}/${RECORD}`, 'release path', 'releases');
  if (loc.missing.length > 1) return { kind: 'absent' };
  const releases = await openReleases(ctx.root, false);
  if (releases === null) return { kind: 'absent' };
  try {
    const st = await lstatAt(releases, version);
    if (st === null) return { kind: 'absent' };
    if (!st.isDirectory()) return { kind: 'obstructed', why: `releases/${version} is a ${kindOf(st)}, not a release directory` };
    const dir = await releases.child(version, false, `releases/${version}`).catch((err: unknown) => {
      if (err instanceof DirectorySwapped) return null;
      throw err;
    });
    if (dir === null) return { kind: 'obstructed', why: `releases/${version} was replaced while Datum read it` };
    try {
      const raw = await readJsonAt(dir, RECORD, limits.smallRecordBytes).catch((err: Error) => ({ unreadable: err.message }));
      const parsed = releaseRecord.safeParse(raw);
      if (!parsed.success)
        return {
          kind: 'obstructed',
          why: `releases/${version} exists without a readable ${RECORD}, so Datum cannot tell what it holds`,
        };
      return { kind: 'recorded', record: parsed.data, id: dir.id };
    } finally {
      await dir.close();
    }
  } finally {
    await releases.close();
  }
}

export async function observeRelease(ctx: NodeContext, spec: Pick<ReleaseSpec, 'version' | 'sha256'>): Promise<ObservedResource> {
  return await observeGuarded('release', {}, () => observeReleaseNow(ctx, spec));
}

async function observeReleaseNow(ctx: NodeContext, spec: Pick<ReleaseSpec, 'version' | 'sha256'>): Promise<ObservedResource> {
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
    return observed(
      'release',
      null,
      current.marker,
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
  let release: Identity;
  if (existing.kind === 'recorded') {
    how = `reused releases/${spec.version} (already unpacked, sha256 ${short(spec.sha256)})`;
    release = existing.id;
  } else {
    release = await installFromArtifact(ctx, spec);
    how = `unpacked ${spec.artifact} (sha256 ${short(spec.sha256)} verified) into releases/${spec.version}`;
  }
  const marker = await atWrite((checked) => switchCurrent(ctx.root, spec.version, release, checked));
  const from = current.kind === 'link' ? current.target : 'nothing';
  return { marker_after: marker, detail: `${how} and switched current from ${from} to releases/${spec.version}.` };
}

/**
 * Fetches the artifact into .datum/tmp, verifies its sha256 and inspects every entry, all from
 * one descriptor of the downloaded copy (the bytes that verified are the bytes that land), then
 * unpacks it (src/agent/fs/releases.ts). Returns the identity of the installed release directory.
 */
async function installFromArtifact(ctx: NodeContext, spec: ReleaseInstallSpec): Promise<Identity> {
  const name = `artifact-${randomBytes(6).toString('hex')}.tgz`;
  const installed = await inDatumDir(
    ctx.root,
    'tmp',
    true,
    async (tmp) => {
      try {
        await fetchArtifact(spec.artifact, tmp, name);
        const { handle } = await openRegular(tmp.at(name), `.datum/tmp/${name}`);
        try {
          const actual = await sha256Handle(handle);
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
          const allowed = await inspectArchive(handle);
          await locateIn(ctx.root, `releases/${spec.version}`, 'release path', 'releases');
          return await unpackRelease(ctx.root, spec, handle, allowed, () => readReleaseDir(ctx, spec.version));
        } finally {
          await handle.close();
        }
      } finally {
        await tmp.remove(name);
      }
    },
    null,
  );
  return installed!;
}

/**
 * The release directory a service runs in: `current` must be a symlink to releases/<version>, a
 * release Datum installed (a real directory with its record) in a real releases/. Anything else
 * (a `current` pointing at another directory of the root, at a release without a record, out
 * of the root) is refused: a service never runs from there.
 */
export async function currentReleaseDir(ctx: NodeContext): Promise<string> {
  const current = await readCurrent(ctx);
  const fail = (type: AgentRefusal['type'], problem: string, fix: string) => new AgentRefusal(type, withFix(problem, fix));
  if (current.kind === 'absent')
    throw fail(
      SERVICE_START_FAILED,
      `there is no current release (${path.join(ctx.root, 'current')} is absent)`,
      'install the release this service runs first; Datum orders release.install before service actions',
    );
  if (current.kind === 'obstructed')
    throw fail(SERVICE_START_FAILED, `"current" is a ${current.what}, not a symlink to a release`, 'move "current" away by hand');
  if (current.release === null) {
    const resolved = path.resolve(ctx.root, current.target);
    throw fail(
      isInside(ctx.root, resolved) ? SERVICE_START_FAILED : 'PathOutsideRoot',
      `current points at ${current.target}, not at a release under releases/, and a service runs only from a release Datum installed`,
      'let Datum switch current to a release under releases/',
    );
  }
  const dir = await readReleaseDir(ctx, current.release);
  if (dir.kind !== 'recorded')
    throw fail(
      SERVICE_START_FAILED,
      `current points at releases/${current.release}, which is not a release Datum installed (${dir.kind === 'absent' ? 'it does not exist' : dir.why})`,
      'let Datum install the release and switch current to it',
    );
  return path.join(ctx.root, 'releases', current.release);
}
