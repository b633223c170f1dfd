import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { withFix } from '../../contract';
import { AgentRefusal, UNIT_CHANGE_FAILED } from '../refusal';
import { oneLine, parseShow, run, type Ran } from '../services/systemd';

/*
 * systemctl as the unit provider calls it: one argv per call, no shell, the manager chosen by
 * agent.yaml (units.manager), and every unit name after "--". systemctl takes a name that starts
 * with "-" as an option, mangles an invalid name into another unit's and expands globs in it
 * (reach-facts S5), so the provider passes only names unitNameProblem accepted, and always after
 * "--". Timestamps are asked for as us+utc: fixed format, microseconds, UTC (S4).
 */

export type Manager = 'system' | 'user';

const managerFlag = (manager: Manager): string[] => (manager === 'user' ? ['--user'] : []);

/** What the provider asks `show` about every unit it observes (declared properties come on top). */
export const UNIT_PROPERTIES = [
  'Id',
  'LoadState',
  'LoadError',
  'ActiveState',
  'SubState',
  'NeedDaemonReload',
  'FragmentPath',
  'DropInPaths',
  'MainPID',
  'ExecMainStartTimestamp',
  'ActiveEnterTimestamp',
  'InvocationID',
] as const;

/**
 * Whether the manager is still carrying out a job on the unit, a start or a stop under way (its
 * `show` with ActiveState, SubState and Job). A unit waiting to be restarted after a crash
 * (auto-restart) is not: it failed, and that is what there is to see.
 */
export const jobUnderWay = (show: Record<string, string | undefined>): boolean =>
  ((show.ActiveState === 'activating' || show.ActiveState === 'deactivating') && show.SubState !== 'auto-restart') ||
  (show.Job ?? '') !== '';

/** Reads the unit's state again every 100 ms while a job is under way on it, for at most `maxMs`; the last reading. */
export async function afterJob(read: () => Promise<Record<string, string>>, maxMs: number): Promise<Record<string, string>> {
  const deadline = Date.now() + maxMs;
  let show = await read();
  while (jobUnderWay(show) && Date.now() < deadline) {
    await sleep(100);
    show = await read();
  }
  return show;
}

/** The argv of `systemctl show` for units: the properties given, timestamps in µs UTC, the names after "--". */
export const showArgv = (manager: Manager, names: string | readonly string[], properties: readonly string[]): string[] => [
  ...managerFlag(manager),
  'show',
  '--timestamp=us+utc',
  `--property=${properties.join(',')}`,
  '--',
  ...(typeof names === 'string' ? [names] : names),
];

/**
 * The argv of a verb that changes a unit (enable, start, restart): never asks for a password,
 * starts queued without waiting (--no-block), the name after "--".
 */
export const changeArgv = (manager: Manager, verb: 'enable' | 'start' | 'restart', name: string): string[] => [
  ...managerFlag(manager),
  verb,
  '--no-ask-password',
  ...(verb === 'enable' ? [] : ['--no-block']),
  '--',
  name,
];

export const reloadArgv = (manager: Manager): string[] => [...managerFlag(manager), 'daemon-reload', '--no-ask-password'];

/** The manager's own unit search path, highest priority first. */
export const unitPathArgv = (manager: Manager): string[] => [...managerFlag(manager), 'show', '--property=UnitPath'];

const SHOW_TIMEOUT_MS = 30_000;
/** A start waits for the unit's own start timeout (90 s by default), and a little more. */
const CHANGE_TIMEOUT_MS = 120_000;

const said = (ran: Ran) => oneLine(ran.error ?? ran.stderr) || `exit ${ran.code}`;

/** Thrown when systemctl cannot even answer a read: the manager is not there, or refuses the agent. */
export class ManagerUnreachable extends Error {
  constructor(
    readonly manager: Manager,
    readonly why: string,
  ) {
    super(`systemd's ${manager} manager does not answer (systemctl${manager === 'user' ? ' --user' : ''}: ${why})`);
    this.name = 'ManagerUnreachable';
  }
}

/** What `systemctl show` says of a unit now (Key=Value lines; the order is the manager's). */
export async function showUnit(manager: Manager, name: string, properties: readonly string[]): Promise<Record<string, string>> {
  const ran = await run('systemctl', showArgv(manager, name, properties), { timeoutMs: SHOW_TIMEOUT_MS });
  if (ran.code !== 0) throw new ManagerUnreachable(manager, said(ran));
  return parseShow(ran.stdout);
}

/** The argv of `systemctl is-enabled` for one unit, the name after "--". */
export const isEnabledArgv = (manager: Manager, name: string): string[] => [...managerFlag(manager), 'is-enabled', '--', name];

/** The argv of `systemctl list-unit-files` for unit names (no glob: names unitNameProblem accepted), the names after "--". */
export const listUnitFilesArgv = (manager: Manager, names: readonly string[]): string[] => [
  ...managerFlag(manager),
  'list-unit-files',
  '--no-legend',
  '--full',
  '--',
  ...names,
];

/**
 * What `show` says of a unit, with UnitFileState as the unit files say it now. The manager's own
 * UnitFileState property is a cache a daemon-reload refreshes: right after `systemctl disable` it
 * may still say enabled (seen on 252), and a writer who disables the unit must be seen at once.
 *
 * Reads asked for in the same turn of the event loop (a node's units observed together, the
 * watches of many nodes) go out as one `show` and one `list-unit-files` for all of them: two
 * programs instead of two per unit. Each caller still gets an answer read after it asked.
 */
export function readUnitState(manager: Manager, name: string, properties: readonly string[]): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    let batch = pending.get(manager);
    if (batch === undefined) {
      batch = [];
      pending.set(manager, batch);
      setImmediate(() => void flush(manager));
    }
    batch.push({ name, properties, resolve, reject });
  });
}

interface Read {
  name: string;
  properties: readonly string[];
  resolve: (state: Record<string, string>) => void;
  reject: (err: unknown) => void;
}

const pending = new Map<Manager, Read[]>();
/** Names per call: each `show` block is about a kilobyte, and execFile keeps 1 MiB of output. */
const NAMES_PER_CALL = 100;

async function flush(manager: Manager): Promise<void> {
  const batch = pending.get(manager) ?? [];
  pending.delete(manager);
  const names = [...new Set(batch.map((r) => r.name))];
  const properties = [...new Set(batch.flatMap((r) => r.properties))];
  try {
    const states = new Map<string, Record<string, string>>();
    for (let i = 0; i < names.length; i += NAMES_PER_CALL) {
      const chunk = names.slice(i, i + NAMES_PER_CALL);
      const [shown, enabled] = await Promise.all([showUnits(manager, chunk, properties), unitFileStates(manager, chunk)]);
      chunk.forEach((name, j) => states.set(name, { ...shown[j], UnitFileState: enabled.get(name) ?? '' }));
    }
    for (const read of batch) {
      const state = states.get(read.name)!;
      const asked = Object.fromEntries(read.properties.filter((p) => p in state).map((p) => [p, state[p]]));
      read.resolve({ ...asked, UnitFileState: state.UnitFileState });
    }
  } catch (err) {
    for (const read of batch) read.reject(err);
  }
}

/** `show` of several units: one block each, in the order asked, blank lines between. */
async function showUnits(
  manager: Manager,
  names: string[],
  properties: readonly string[],
): Promise<Array<Record<string, string>>> {
  if (names.length === 1) return [await showUnit(manager, names[0], properties)];
  const ran = await run('systemctl', showArgv(manager, names, properties), { timeoutMs: SHOW_TIMEOUT_MS });
  if (ran.code !== 0) throw new ManagerUnreachable(manager, said(ran));
  const blocks = ran.stdout.split('\n\n').filter((b) => b.trim() !== '');
  // A block per unit, always (an unknown unit has one too): anything else is read again one by one.
  if (blocks.length === names.length) return blocks.map(parseShow);
  return Promise.all(names.map((name) => showUnit(manager, name, properties)));
}

/**
 * Each unit's UnitFileState from its files now: `list-unit-files` for plain names (a line per unit
 * that has a file, none for one that has not), `is-enabled` for a template's instance or an
 * escaped name, which list-unit-files cannot name. Both print the same states (seen on 252).
 */
async function unitFileStates(manager: Manager, names: string[]): Promise<Map<string, string>> {
  const states = new Map<string, string>();
  const plain = names.filter((n) => !n.includes('@') && !n.includes('\\'));
  const others = names.filter((n) => !plain.includes(n));
  if (plain.length > 0) {
    const ran = await run('systemctl', listUnitFilesArgv(manager, plain), { timeoutMs: SHOW_TIMEOUT_MS });
    // Exit 1 with nothing said: none of the names has a unit file.
    if (ran.code !== 0 && !(ran.code === 1 && ran.stderr.trim() === '')) throw new ManagerUnreachable(manager, said(ran));
    for (const line of ran.stdout.split('\n')) {
      const [unit, state] = line.trim().split(/\s+/);
      if (unit && state && plain.includes(unit)) states.set(unit, state);
    }
  }
  for (const name of others) {
    const ran = await run('systemctl', isEnabledArgv(manager, name), { timeoutMs: SHOW_TIMEOUT_MS });
    // Exit 1 is "not enabled" (disabled, static, masked, or no unit file: then nothing is printed).
    if (ran.code !== 0 && ran.code !== 1) throw new ManagerUnreachable(manager, said(ran));
    states.set(name, ran.stdout.split('\n')[0]?.trim() ?? '');
  }
  return states;
}

/**
 * The manager's runtime directory, where its changes leave entries (seen on 252):
 *  - units/invocation:<unit>: written when the unit starts, replaced when it restarts, removed
 *    when it stops or dies (src/core/unit.c unit_export_invocation_id);
 *  - generator, generator.early, generator.late: made again by every daemon-reload;
 *  - <system|user>.control: made by the first set-property --runtime.
 * The user manager's is under $XDG_RUNTIME_DIR, the variable systemctl --user finds it by.
 */
export function managerRuntimeDir(manager: Manager): string {
  if (manager === 'system') return '/run/systemd';
  const runtime = process.env.XDG_RUNTIME_DIR;
  const base = runtime !== undefined && path.isAbsolute(runtime) ? runtime : `/run/user/${process.getuid?.() ?? 0}`;
  return path.join(base, 'systemd');
}

/** The manager's UnitPath, highest priority first. */
export async function unitPath(manager: Manager): Promise<string[]> {
  const ran = await run('systemctl', unitPathArgv(manager), { timeoutMs: SHOW_TIMEOUT_MS });
  if (ran.code !== 0) throw new ManagerUnreachable(manager, said(ran));
  return (parseShow(ran.stdout).UnitPath ?? '').split(' ').filter(Boolean);
}

/**
 * Runs a verb that changes the manager's state; a non-zero exit is UNIT_CHANGE_FAILED (the agent
 * tried and the manager said no), with systemctl's own words and the fix a person can act on.
 */
export async function change(manager: Manager, argv: string[], what: string, name: string): Promise<void> {
  const ran = await run('systemctl', argv, { timeoutMs: CHANGE_TIMEOUT_MS });
  if (ran.code === 0) return;
  const words = said(ran);
  const denied = /authenticat|access denied|not authorized|permission/i.test(words);
  const user = manager === 'user' ? ' --user' : '';
  throw new AgentRefusal(
    UNIT_CHANGE_FAILED,
    withFix(
      `systemctl${user} ${what} failed: ${words}`,
      denied
        ? "allow the agent's user to manage units (a polkit rule for org.freedesktop.systemd1.manage-units), or run the agent as root"
        : `see systemctl${user} status ${name} and its journal (journalctl${user} -u ${name}), then correct the unit in desired state`,
    ),
    { unit: name, argv: argv.join(' '), exit: ran.code ?? -1 },
  );
}

/**
 * A timestamp as `--timestamp=us+utc` prints it ("Sat 2026-12-05 12:47:16.779342 UTC"), in
 * microseconds since the epoch; null when empty (never happened) or in another format.
 */
export function parseTimestampUs(text: string | undefined): number | null {
  const m = /^\w{3} (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)\.(\d{6}) UTC$/.exec(text ?? '');
  if (!m) return null;
  const ms = Date.parse(`${m[1]}T${m[2]}Z`);
  return Number.isNaN(ms) ? null : ms * 1000 + Number(m[3]);
}

/** Microseconds since the epoch as us+utc prints them, for the evidence a person reads. */
export function formatTimestampUs(us: number): string {
  const ms = Math.floor(us / 1000);
  const iso = new Date(ms).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}.${String(us % 1_000_000).padStart(6, '0')} UTC`;
}
