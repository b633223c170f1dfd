import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { z } from 'zod';
import { debianVersionProblem, packageNameProblem, type Json, type ObservedResource, type PackageSpec } from '../../domain';
import { withFix } from '../../contract';
import { fetchArtifact, inDatumDir, openRegular, pathStamp, sha256Handle } from '../fs';
import { assertPackageAllowed } from '../allow';
import {
  DpkgUnreadable,
  NOT_INSTALLED,
  admindirOf,
  aptCandidate,
  aptInstall,
  architectures,
  debFields,
  dpkgInstall,
  installedRelations,
  lastLines,
  packageMarker,
  packageRecord,
  standingInTheWay,
  type InTheWay,
  type PackageEntry,
  type PackageRecord,
  type ToolRun,
  untilDpkgIdle,
} from '../dpkg';
import { AgentRefusal, PACKAGE_INSTALL_FAILED } from '../refusal';
import { packageInstallSpec, type AgentConfig } from '../../schemas';
import { observed, short, specOf, type ApplyResult, type AtWrite, type NodeContext, type Provider } from './types';

/*
 * package: a Debian package in the database of dpkg under agent.yaml's packages.root (default
 * "/", the host's own; never inside a node root). Observed value: {version, status} of the
 * package where dpkg has its files installed, null where dpkg knows nothing of it or keeps only
 * its conffiles (config-files) or its selection (not-installed); only status "installed" is
 * converged. Marker: a digest of the package's whole entry in dpkg's database (packageMarker).
 * Installed with dpkg from a .deb whose sha256 and own control fields verify, or with apt-get
 * from the host's sources, only where agent.yaml's allow.packages lets this package in from that
 * source. Never removed: removal is destructive, and a package another one would have to make
 * room for (Conflicts, Breaks) is an obstruction. A held package is the host operator's.
 */

type InstallSpec = z.infer<typeof packageInstallSpec>;

/**
 * How long an observation waits for a dpkg or apt run on the database to end before it reads the
 * package mid-run: inside the observe's minute, with time left for the rest of the node.
 */
const DPKG_WAIT_MS = 20_000;

/** The root dpkg works on for this node: agent.yaml's packages.root. */
const dpkgRoot = (config: AgentConfig | undefined) => config?.packages.root ?? '/';

export const packageProvider: Provider<PackageSpec> = {
  actions: ['package.install'],
  destructive: ['package.remove'],
  observe: (ctx, _key, spec) => observePackage(ctx, spec),
  apply: (ctx, action, atWrite) => applyPackageInstall(ctx, specOf(action, packageInstallSpec), atWrite),
  targetNow: (ctx, action) => observePackage(ctx, specOf(action, packageInstallSpec)),
  watch: {
    marker: (_root, _key, spec, config) => watchMarker(dpkgRoot(config), spec.name),
    // dpkg rewrites status by rename and journals into updates/ while it works: both change entries here.
    dirs: (_root, _key, _spec, config) => [admindirOf(dpkgRoot(config)), path.join(admindirOf(dpkgRoot(config)), 'updates')],
  },
  importSpec: (ctx, _key, name) => importPackage(ctx, name),
};

/** The instance of the package that observe reports: one with files on the host if there is one. */
function instanceOf(record: PackageRecord): PackageEntry | null {
  if (record.kind === 'unknown') return null;
  return record.entries.find((e) => !NOT_INSTALLED.has(e.status)) ?? record.entries[0] ?? null;
}

/** {version, status} where dpkg has the package's files installed (in any state); null where it has none. */
function valueOf(entry: PackageEntry | null): Json {
  return entry === null || NOT_INSTALLED.has(entry.status) ? null : { version: entry.version, status: entry.status };
}

/** What a person reads about the package in the snapshot: dpkg's state of it, its selection (a hold), its architecture. */
function describe(entry: PackageEntry | null, record: PackageRecord): Record<string, Json> {
  if (entry === null) return { status: 'unknown' };
  return {
    status: entry.status,
    version: entry.version || null,
    selection: entry.want,
    held: entry.want === 'hold',
    ...(entry.eflag === 'ok' ? {} : { error_flag: entry.eflag }),
    abbrev: entry.abbrev,
    architecture: entry.architecture || null,
    ...(entry.configVersion ? { config_version: entry.configVersion } : {}),
    ...(record.kind === 'known' && record.entries.length > 1
      ? { instances: record.entries.map((e) => `${e.id} ${e.abbrev.trim()}`) }
      : {}),
  };
}

/** dpkg's state of the package in a few words: "demo-hello 2.0-1 installed (hold)", "no package demo-hello". */
function shown(name: string, record: PackageRecord): string {
  const e = instanceOf(record);
  if (e === null) return `no package ${name}`;
  return `${name} ${e.version || '(no version)'} ${e.status}${e.want === 'hold' ? ' (hold)' : ''}`;
}

const unreadableObstruction = (root: string, err: DpkgUnreadable) =>
  withFix(
    `dpkg's database under ${root} cannot be read (${err.message}), and Datum does not install into a database it cannot read`,
    'repair dpkg on the host (dpkg --audit lists what is wrong), or correct packages.root in agent.yaml',
  );

export async function observePackage(ctx: NodeContext, spec: Pick<PackageSpec, 'name' | 'version'>): Promise<ObservedResource> {
  const root = dpkgRoot(ctx.config);
  const detail: Record<string, Json> = { package: spec.name, root };
  const nameProblem = packageNameProblem(spec.name);
  // Never handed to dpkg-query: a name that reads as an option or a glob is no package.
  if (nameProblem !== null)
    return observed(
      'package',
      null,
      null,
      detail,
      withFix(`"${spec.name}" ${nameProblem}`, 'name the package correctly in desired state'),
    );
  // What a dpkg or apt still at work on the database has not finished is read once it has (busy.ts).
  const busy = await untilDpkgIdle(root, DPKG_WAIT_MS);
  if (busy.length > 0) detail.dpkg_busy = `dpkg or apt (pid ${busy.join(', ')}) still works on this database: read mid-run`;
  let record: PackageRecord;
  try {
    record = await packageRecord(root, spec.name);
  } catch (err) {
    if (!(err instanceof DpkgUnreadable)) throw err;
    return observed('package', null, null, { ...detail, problem: err.message }, unreadableObstruction(root, err));
  }
  const entry = instanceOf(record);
  const value = valueOf(entry);
  Object.assign(detail, describe(entry, record));
  const converged = entry !== null && entry.status === 'installed' && entry.version === spec.version;
  let obstruction: string | null = null;
  if (!converged) {
    try {
      obstruction = inTheWayProblem(spec, standingInTheWay(spec, await installedRelations(root)));
    } catch (err) {
      if (!(err instanceof DpkgUnreadable)) throw err;
      obstruction = unreadableObstruction(root, err);
    }
  }
  return observed('package', value, packageMarker(record), detail, obstruction);
}

/** The obstruction of packages an install would push out; null when it would push out none. */
function inTheWayProblem(spec: Pick<PackageSpec, 'name' | 'version'>, found: InTheWay[]): string | null {
  if (found.length === 0) return null;
  const names = [...new Set(found.map((f) => f.package))];
  return withFix(
    `installing ${spec.name} ${spec.version} would push out ${found.map((f) => `${f.package} ${f.version} (${f.because}: ${f.consequence})`).join(' and ')}, and Datum never removes a package`,
    `an operator removes ${names.join(' and ')} by hand if ${names.length > 1 ? 'they' : 'it'} should go, or desired state names a version of ${spec.name} that does not push ${names.length > 1 ? 'them' : 'it'} out`,
  );
}

/**
 * package.install, in this order: the host allows this package from this source (before anything
 * is read or fetched); dpkg's database holds no hold on it and nothing that would have to go;
 * then the .deb (fetched, sha256 verified, its own control fields checked) or apt's download;
 * then, through `atWrite`, dpkg or apt-get itself. What dpkg's database reports afterwards is the
 * marker the write left; dpkg's exit code is execution evidence only.
 */
export async function applyPackageInstall(ctx: NodeContext, spec: InstallSpec, atWrite: AtWrite): Promise<ApplyResult> {
  assertPackageAllowed(ctx.config, spec.name, spec.artifact === undefined ? 'apt' : 'artifact');
  const root = dpkgRoot(ctx.config);
  const before = await readForApply(root, spec.name);
  refuseHeld(root, spec, before);
  const inTheWay = inTheWayProblem(spec, standingInTheWay(spec, await relationsForApply(root)));
  if (inTheWay !== null) throw new AgentRefusal('DestructiveActionRefusal', inTheWay, { package: spec.name });
  const { run, how } =
    spec.artifact === undefined
      ? await installFromApt(ctx, root, spec, atWrite)
      : await installFromDeb(ctx, root, { ...spec, artifact: spec.artifact, sha256: spec.sha256 ?? '' }, atWrite);
  const after = await readForApply(root, spec.name);
  const tool = spec.artifact === undefined ? 'apt-get' : 'dpkg';
  if (run.code !== 0 || run.ended !== null) throw installFailed(tool, spec, run, after);
  const said = lastLines(run.output, 2);
  return {
    marker_after: packageMarker(after),
    detail: `${how}; ${tool} exited 0${said ? ` ("${said}")` : ''}, and dpkg's database now reports ${shown(spec.name, after)}.`,
  };
}

async function readForApply(root: string, name: string): Promise<PackageRecord> {
  try {
    return await packageRecord(root, name);
  } catch (err) {
    if (!(err instanceof DpkgUnreadable)) throw err;
    throw new AgentRefusal(PACKAGE_INSTALL_FAILED, unreadableObstruction(root, err), { root });
  }
}

async function relationsForApply(root: string) {
  try {
    return await installedRelations(root);
  } catch (err) {
    if (!(err instanceof DpkgUnreadable)) throw err;
    throw new AgentRefusal(PACKAGE_INSTALL_FAILED, unreadableObstruction(root, err), { root });
  }
}

/** A hold is the host operator's decision, and dpkg --install would silently clear it: refused. */
function refuseHeld(root: string, spec: InstallSpec, before: PackageRecord): void {
  const entry = instanceOf(before);
  if (entry?.want !== 'hold') return;
  const where = root === '/' ? '' : ` (on the database under ${root}: APT_CONFIG naming it, or dpkg --root=${root})`;
  throw new AgentRefusal(
    'OperatorOwnedRefusal',
    withFix(
      `package ${spec.name} is on hold in dpkg's selections on this host (${entry.abbrev.trim()}: ${shown(spec.name, before)}), which is the host operator's decision, and installing ${spec.version} would clear it`,
      `an operator releases the hold if Datum may install ${spec.version}: apt-mark unhold ${spec.name}${where}`,
    ),
    { package: spec.name, selection: 'hold', version: entry.version },
  );
}

/**
 * The .deb: fetched into .datum/tmp, its sha256 verified, its own Package, Version and
 * Architecture checked against the spec and the host, and its Conflicts, Breaks and Replaces
 * against what is installed, all before dpkg runs on it. dpkg reads the very descriptor that
 * verified (/proc/<agent>/fd/<n>), so the bytes installed are the bytes checked.
 */
async function installFromDeb(
  ctx: NodeContext,
  root: string,
  spec: InstallSpec & { artifact: string; sha256: string },
  atWrite: AtWrite,
): Promise<{ run: ToolRun; how: string }> {
  const name = `package-${randomBytes(6).toString('hex')}.deb`;
  const run = await inDatumDir(
    ctx.root,
    'tmp',
    true,
    async (tmp) => {
      try {
        await fetchArtifact(spec.artifact, tmp, name);
        const { handle } = await openRegular(tmp.at(name), `.datum/tmp/${name}`);
        try {
          const actual = await sha256Handle(handle);
          if (actual !== spec.sha256)
            throw new AgentRefusal(
              'ArtifactDigestMismatch',
              withFix(
                `${spec.artifact} has sha256 ${actual}, but desired state expects ${spec.sha256}; dpkg was not run`,
                'publish the right .deb, or correct sha256 in the desired state',
              ),
              { expected_sha256: spec.sha256, actual_sha256: actual },
            );
          const file = `/proc/${process.pid}/fd/${handle.fd}`;
          await checkDeb(root, spec, file);
          return await atWrite(() => dpkgInstall(root, file));
        } finally {
          await handle.close();
        }
      } finally {
        await tmp.remove(name);
      }
    },
    null,
  );
  return {
    run: run!,
    how: `ran dpkg --install on ${spec.artifact} (sha256 ${short(spec.sha256)} verified, its control names ${spec.name} ${spec.version})`,
  };
}

/** Refuses a .deb that is not the package desired state names, not for this host, or that would push another package out. */
async function checkDeb(root: string, spec: InstallSpec & { artifact: string }, file: string): Promise<void> {
  const read = await debFields(file);
  if ('problem' in read)
    throw new AgentRefusal(
      'ArtifactUnavailable',
      withFix(
        `${spec.artifact} is not a Debian package dpkg-deb can read (${read.problem}); dpkg was not run`,
        'publish the .deb itself',
      ),
      { artifact: spec.artifact },
    );
  const deb = read.fields;
  if (deb.name !== spec.name || deb.version !== spec.version)
    throw new AgentRefusal(
      'ArtifactUnavailable',
      withFix(
        `${spec.artifact} is ${deb.name} ${deb.version} by its own control file, not ${spec.name} ${spec.version} as desired state says; dpkg was not run`,
        `publish the .deb of ${spec.name} ${spec.version} (its file name does not count, its control fields do), or correct name and version in the desired state`,
      ),
      { artifact: spec.artifact, deb_package: deb.name, deb_version: deb.version },
    );
  const archs = await architectures(root);
  if (!archs.includes(deb.architecture))
    throw new AgentRefusal(
      'ArtifactUnavailable',
      withFix(
        `${spec.artifact} is built for ${deb.architecture}, and dpkg under ${root} installs ${archs.join(', ')}; dpkg was not run`,
        `publish the ${spec.name} ${spec.version} .deb built for this host's architecture`,
      ),
      { artifact: spec.artifact, deb_architecture: deb.architecture },
    );
  const found = standingInTheWay({ ...spec, ...deb, name: spec.name, version: spec.version }, await relationsForApply(root));
  const inTheWay = inTheWayProblem(spec, found);
  if (inTheWay !== null) throw new AgentRefusal('DestructiveActionRefusal', inTheWay, { package: spec.name });
}

/** From the host's apt sources: the download first (no fence held for it), then the install through atWrite. */
async function installFromApt(
  ctx: NodeContext,
  root: string,
  spec: InstallSpec,
  atWrite: AtWrite,
): Promise<{ run: ToolRun; how: string }> {
  const aptConfig = ctx.config?.packages.apt_config;
  const known = await aptCandidate(root, aptConfig, spec.name, spec.version);
  if ('problem' in known)
    throw new AgentRefusal(
      PACKAGE_INSTALL_FAILED,
      withFix(
        `${known.problem}; nothing was fetched or installed`,
        "publish that version in the host's apt sources and update the host's package lists (apt-get update), or correct version in the desired state",
      ),
      { package: spec.name, version: spec.version },
    );
  const inTheWay = inTheWayProblem(spec, standingInTheWay(known.candidate, await relationsForApply(root)));
  if (inTheWay !== null) throw new AgentRefusal('DestructiveActionRefusal', inTheWay, { package: spec.name });
  const fetched = await aptInstall(root, aptConfig, spec.name, spec.version, true);
  if (fetched.code !== 0 || fetched.ended !== null)
    throw installFailed('apt-get --download-only', spec, fetched, await readForApply(root, spec.name));
  const run = await atWrite(() => aptInstall(root, aptConfig, spec.name, spec.version, false));
  const config = aptConfig ? ` with APT_CONFIG=${aptConfig}` : '';
  return { run, how: `ran apt-get install ${spec.name}=${spec.version}${config}` };
}

/** A package manager that ran and did not finish: tried, not refused. What dpkg reports now goes with it. */
function installFailed(tool: string, spec: InstallSpec, run: ToolRun, after: PackageRecord): AgentRefusal {
  const how =
    run.ended === 'cancelled'
      ? 'was stopped because the action was cancelled'
      : run.ended === 'timeout'
        ? 'ran out of time and was stopped'
        : `exited ${run.code ?? run.signal}`;
  return new AgentRefusal(
    PACKAGE_INSTALL_FAILED,
    withFix(
      `${tool} for ${spec.name} ${spec.version} ${how}: ${lastLines(run.output) || 'no message'}; dpkg's database now reports ${shown(spec.name, after)}`,
      tool.startsWith('apt-get')
        ? "see apt's message: a version missing from the host's package lists needs the repository to publish it and an apt-get update on the host"
        : "see dpkg's message; dpkg --audit on the host lists what it left half done, and the next pass observes the package again",
    ),
    { tool, exit_code: run.code, output: lastLines(run.output, 8), reported_after: shown(spec.name, after) },
  );
}

/**
 * The watch's marker: the same digest observe reports, read again only when dpkg's status file
 * or journal changed since the last read (their stamps are cheap; dpkg-query is a process).
 */
const lastRead = new Map<string, { stamp: string; marker: string }>();

async function watchMarker(root: string, name: string): Promise<string> {
  if (packageNameProblem(name) !== null) return 'invalid';
  const admin = admindirOf(root);
  const stamp = `${await pathStamp(path.join(admin, 'status'))}|${await pathStamp(path.join(admin, 'updates'))}`;
  const key = `${root}\0${name}`;
  const known = lastRead.get(key);
  if (known?.stamp === stamp) return known.marker;
  const marker = await packageRecord(root, name).then(packageMarker, (err: unknown) => {
    if (err instanceof DpkgUnreadable) return 'unreadable';
    throw err;
  });
  lastRead.set(key, { stamp, marker });
  return marker;
}

/** `datum import`: the package as dpkg has it installed, declared from the host's apt sources. */
async function importPackage(ctx: NodeContext, name: string): Promise<{ spec: PackageSpec } | { problem: string }> {
  const nameProblem = packageNameProblem(name);
  if (nameProblem !== null) return { problem: `"${name}" ${nameProblem}` };
  const root = dpkgRoot(ctx.config);
  let record: PackageRecord;
  try {
    record = await packageRecord(root, name);
  } catch (err) {
    if (!(err instanceof DpkgUnreadable)) throw err;
    return { problem: `dpkg's database under ${root} cannot be read: ${err.message}` };
  }
  const entry = instanceOf(record);
  if (entry === null || NOT_INSTALLED.has(entry.status))
    return {
      problem: `dpkg under ${root} has no package ${name} installed${entry ? ` (${entry.status})` : ''}, so there is nothing to declare`,
    };
  if (entry.status !== 'installed')
    return {
      problem: `${name} ${entry.version} is ${entry.status} in dpkg's database under ${root}, not installed: finish it first (dpkg --configure -a)`,
    };
  const versionProblem = debianVersionProblem(entry.version);
  if (versionProblem !== null) return { problem: `dpkg reports ${name} at version "${entry.version}", which ${versionProblem}` };
  return { spec: { type: 'package', name, version: entry.version } };
}
