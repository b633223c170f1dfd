import { createHash } from 'node:crypto';
import path from 'node:path';
import { parseRelations, type Relation, type RelatedPackage } from './relations';
import { lastLines, runTool, ToolMissing, type ToolRun } from './run';

/*
 * Reading dpkg's database, always through dpkg-query with an explicit --root: dpkg-query applies
 * the journal in <admindir>/updates/ on top of the status file (a parser of the status file alone
 * would miss what a running or interrupted dpkg recorded there), and it is what dpkg itself reads.
 */

/** How long a read of dpkg's database may take. */
const QUERY_TIMEOUT_MS = 30_000;

/** dpkg's database could not be read (a corrupt status file, an admindir that is a file, no dpkg-query). */
export class DpkgUnreadable extends Error {}

/** dpkg's administrative directory under a root (what --root=R sets it to). */
export const admindirOf = (root: string) => path.join(root, 'var/lib/dpkg');

/** One instance of a package in dpkg's database (Multi-Arch: same packages have one per architecture). */
export interface PackageEntry {
  /** ${binary:Package}: the name, with ":<arch>" for a Multi-Arch: same package. */
  id: string;
  version: string;
  /** ${db:Status-Abbrev}, such as "ii " or "hi ". */
  abbrev: string;
  /** The selection: install, hold, deinstall, purge, unknown. */
  want: string;
  /** ok or reinstreq. */
  eflag: string;
  /** installed, config-files, half-installed, unpacked, half-configured, triggers-awaited, triggers-pending, not-installed. */
  status: string;
  architecture: string;
  /** The version whose conffiles are left, for a removed package. */
  configVersion: string;
  /** ${db-fsys:Last-Modified}: when dpkg last wrote the package's file list, in seconds. */
  lastModified: string;
}

/** What dpkg's database says of a package: nothing (not known, or no database at all), or its instances. */
export type PackageRecord = { kind: 'unknown' } | { kind: 'known'; entries: PackageEntry[]; raw: string };

const FIELDS = [
  'binary:Package',
  'Version',
  'db:Status-Abbrev',
  'db:Status-Want',
  'db:Status-Eflag',
  'db:Status-Status',
  'Architecture',
  'Config-Version',
  'db-fsys:Last-Modified',
] as const;
const FORMAT = `${FIELDS.map((f) => `\${${f}}`).join('\\t')}\\n`;

async function query(root: string, args: string[]): Promise<ToolRun> {
  try {
    return await runTool('dpkg-query', [`--root=${root}`, ...args], { timeoutMs: QUERY_TIMEOUT_MS });
  } catch (err) {
    if (err instanceof ToolMissing) throw new DpkgUnreadable(`dpkg-query ${err.message.replace(/^dpkg-query /, '')}`);
    throw err;
  }
}

const unreadable = (root: string, run: ToolRun) =>
  new DpkgUnreadable(
    `dpkg-query --root=${root} ${run.ended === 'timeout' ? 'did not answer in time' : `exited ${run.code ?? run.signal}`}: ${lastLines(run.stderr || run.output, 2) || 'no message'}`,
  );

/** The package `name` as dpkg's database under `root` holds it now. `name` must be a valid package name (no glob). */
export async function packageRecord(root: string, name: string): Promise<PackageRecord> {
  const run = await query(root, ['--show', `--showformat=${FORMAT}`, '--', name]);
  // 1: "no packages found matching" (also where there is no database yet, which dpkg creates on its first install).
  if (run.code === 1 && /no packages found matching/.test(run.stderr)) return { kind: 'unknown' };
  if (run.code !== 0) throw unreadable(root, run);
  const entries = run.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((line) => {
      const f = line.split('\t');
      return {
        id: f[0] ?? '',
        version: f[1] ?? '',
        abbrev: f[2] ?? '',
        want: f[3] ?? '',
        eflag: f[4] ?? '',
        status: f[5] ?? '',
        architecture: f[6] ?? '',
        configVersion: f[7] ?? '',
        lastModified: f[8] ?? '',
      };
    });
  return entries.length === 0 ? { kind: 'unknown' } : { kind: 'known', entries, raw: run.stdout };
}

/** Statuses in which a package has none of its files on the host (only conffiles, or nothing). */
export const NOT_INSTALLED = new Set(['not-installed', 'config-files']);

/**
 * The change marker of a package: a digest of its whole entry (selection, error flag, status,
 * version, architecture, config version, when its file list was written), so an install, a
 * removal, a hold, a reinstall in another second or an interrupted run each move it, and a change
 * of another package does not.
 */
export function packageMarker(record: PackageRecord): string {
  if (record.kind === 'unknown') return 'absent';
  return `dpkg:${createHash('sha256').update(record.raw).digest('hex').slice(0, 24)}`;
}

/** Every package dpkg holds with files on the host, with its Conflicts, Breaks and Provides. */
export async function installedRelations(root: string): Promise<RelatedPackage[]> {
  const run = await query(root, [
    '--show',
    '--showformat=${Package}\\t${Version}\\t${db:Status-Status}\\t${Conflicts}\\t${Breaks}\\t${Provides}\\n',
  ]);
  if (run.code === 1 && /no packages found/.test(run.stderr)) return [];
  if (run.code !== 0) throw unreadable(root, run);
  return run.stdout
    .split('\n')
    .map((line) => line.split('\t'))
    .filter((f) => f.length >= 6 && !NOT_INSTALLED.has(f[2] ?? ''))
    .map((f) => ({
      name: f[0],
      version: f[1],
      conflicts: parseRelations(f[3]),
      breaks: parseRelations(f[4]),
      provides: parseRelations(f[5]),
    }));
}

/** What a .deb says it is: its own control fields, read with dpkg-deb (never its file name). */
export interface DebFields {
  name: string;
  version: string;
  architecture: string;
  conflicts: Relation[];
  breaks: Relation[];
  replaces: Relation[];
  provides: Relation[];
}

/** The .deb's control fields; null when dpkg-deb cannot read it as a Debian package (its message in `problem`). */
export async function debFields(file: string): Promise<{ fields: DebFields } | { problem: string }> {
  const format = '${Package}\\t${Version}\\t${Architecture}\\t${Conflicts}\\t${Breaks}\\t${Replaces}\\t${Provides}\\n';
  const run = await runTool('dpkg-deb', ['--show', `--showformat=${format}`, '--', file], { timeoutMs: QUERY_TIMEOUT_MS });
  if (run.code !== 0) return { problem: lastLines(run.stderr || run.output, 2) || `dpkg-deb exited ${run.code ?? run.signal}` };
  const f = run.stdout.replace(/\n$/, '').split('\t');
  return {
    fields: {
      name: f[0] ?? '',
      version: f[1] ?? '',
      architecture: f[2] ?? '',
      conflicts: parseRelations(f[3] ?? ''),
      breaks: parseRelations(f[4] ?? ''),
      replaces: parseRelations(f[5] ?? ''),
      provides: parseRelations(f[6] ?? ''),
    },
  };
}

/** The architectures dpkg under `root` installs: its native one and the foreign ones added there, and "all". */
export async function architectures(root: string): Promise<string[]> {
  const native = await runTool('dpkg', [`--root=${root}`, '--print-architecture'], { timeoutMs: QUERY_TIMEOUT_MS });
  const foreign = await runTool('dpkg', [`--root=${root}`, '--print-foreign-architectures'], { timeoutMs: QUERY_TIMEOUT_MS });
  return ['all', ...`${native.stdout}\n${foreign.stdout}`.split(/\s+/).filter((a) => a !== '')];
}
