import path from 'node:path';
import { canonicalJson, sha256Hex, unitNameProblem, type Json, type ObservedResource, type UnitProbe } from '../../domain';
import { withFix } from '../../contract';
import { probeAllowed, probeSpelling } from '../allow';
import { observed } from '../providers/types';
import type { AgentConfig } from '../../schemas';
import { ownMarker, ownPath, readNodeFile, readOwnFile, unitsDir, type InTheWay, type Read, type UnitsDir } from './files';
import { runProbe, type ProbeOutcome } from './probe';
import {
  ManagerUnreachable,
  UNIT_PROPERTIES,
  afterJob,
  formatTimestampUs,
  parseTimestampUs,
  readUnitState,
  unitPath,
} from './systemctl';

/*
 * A unit as its manager and its files show it, in the shape the domain's desiredValue gives
 * (src/domain/resources/unit.ts): only what the spec declares. The evidence behind
 * `started_after` is said in the detail in a person's words ("main process 4711 started …, after
 * nginx.service.d/50-datum.conf was in place …"), and so is every reason a piece is not taken.
 */

/** What to observe of a unit, from its desired spec or from an action's write spec alike. */
export interface UnitView {
  name: string;
  own: { kind: 'content' | 'dropin'; rel: string } | null;
  enabled: boolean;
  active: boolean;
  properties: string[];
  restartOn: { key: string; path: string | null }[];
  probe: UnitProbe | null;
}

/** Everything one observe of a unit read. */
interface Seen {
  units: UnitsDir;
  show: Record<string, string>;
  own: Read | 'absent' | InTheWay | null;
  inputs: { key: string; read: Read | { problem: string } }[];
  probe: ProbeOutcome | { refused: string } | null;
}

const LIVE = new Set(['active', 'reloading']);

/** How long an observation waits for a start or stop under way to end; inside the observe's minute. */
const JOB_WAIT_MS = 10_000;

export async function observeUnit(config: AgentConfig | undefined, root: string, view: UnitView): Promise<ObservedResource> {
  const problem = unitNameProblem(view.name);
  if (problem !== null)
    return observed('unit', null, null, {
      name: view.name,
      refusal: 'InvalidAction',
      problem: withFix(`unit name ${JSON.stringify(view.name)} ${problem}`, 'correct the unit name in desired state'),
    });
  const units = unitsDir(config);
  let seen: Seen;
  try {
    seen = await readUnit(config, root, view, units);
  } catch (err) {
    if (!(err instanceof ManagerUnreachable)) throw err;
    return observed('unit', null, null, { name: view.name, manager: units.manager, problem: err.message });
  }
  const { value, detail } = judge(view, seen);
  return observed('unit', value, unitMarker(view, seen), detail, await obstruction(view, seen));
}

async function readUnit(config: AgentConfig | undefined, root: string, view: UnitView, units: UnitsDir): Promise<Seen> {
  const show = await settledState(units, view);
  const own = view.own === null ? null : await readOwnFile(units, view.own.rel);
  const inputs = await Promise.all(view.restartOn.map(async (r) => ({ key: r.key, read: await readNodeFile(root, r.path) })));
  let probe: Seen['probe'] = null;
  if (view.probe !== null)
    probe = probeAllowed(config, view.probe)
      ? await runProbe(view.probe)
      : { refused: `not run: ${probeSpelling(view.probe)} is not in this host's allow.probes` };
  return { units, show, own, inputs, probe };
}

/**
 * The unit's state once a job the manager is carrying out on it is done (at most JOB_WAIT_MS):
 * read mid-start, a unit another writer is restarting would look stopped, and the watch that saw
 * the restart would hand that moment back as drift. What is still under way then is read as it is.
 */
async function settledState(units: UnitsDir, view: UnitView): Promise<Record<string, string>> {
  const properties = [...UNIT_PROPERTIES, 'Job', ...view.properties];
  return await afterJob(() => readUnitState(units.manager, view.name, properties), JOB_WAIT_MS);
}

/**
 * The marker: what another writer changes. The manager's view of the unit's files and enablement
 * and the declared properties (digested), then Datum's own file's marker, which apply hands to
 * the atomic replace as what it must still find. Not ActiveState, the main pid or the invocation:
 * a crash is a failure a start repairs, never a writer.
 */
export function unitMarker(view: UnitView, seen: Pick<Seen, 'show' | 'own'>): string {
  const s = seen.show;
  const state = {
    load: s.LoadState ?? '',
    file_state: s.UnitFileState ?? '',
    fragment: s.FragmentPath ?? '',
    dropins: s.DropInPaths ?? '',
    properties: Object.fromEntries(view.properties.map((p) => [p, s[p] ?? null])),
  };
  return `unit:${sha256Hex(canonicalJson(state)).slice(0, 16)}|${ownMarker(seen.own)}`;
}

/** The part of a unit's marker that is Datum's own file (what apply's atomic replace compares); undefined when there is none. */
export function ownPartOf(marker: string | null | undefined): string | undefined {
  if (typeof marker !== 'string' || !marker.startsWith('unit:')) return undefined;
  const part = marker.split('|')[1];
  return part === undefined || part === 'none' ? undefined : part;
}

const isRead = (r: Read | 'absent' | InTheWay | { problem: string } | null): r is Read =>
  r !== null && typeof r === 'object' && 'sha256' in r;

/** When the unit's process started (µs): the main process of a service, else when the unit last became active. */
export function startedUs(name: string, show: Record<string, string>): number | null {
  if (!LIVE.has(show.ActiveState ?? '')) return null;
  return parseTimestampUs(name.endsWith('.service') ? show.ExecMainStartTimestamp : show.ActiveEnterTimestamp);
}

/** Whether the manager loaded Datum's own file as the unit's fragment or one of its drop-ins. */
function loadedOwn(view: UnitView, seen: Seen): boolean {
  if (view.own === null) return true;
  const abs = ownPath(seen.units, view.own.rel);
  return view.own.kind === 'content' ? seen.show.FragmentPath === abs : (seen.show.DropInPaths ?? '').split(' ').includes(abs);
}

function judge(view: UnitView, seen: Seen): { value: Json; detail: Record<string, Json> } {
  const s = seen.show;
  const value: Record<string, Json> = {};
  const ownSha = isRead(seen.own) ? seen.own.sha256 : null;
  if (view.own?.kind === 'content') value.content_sha256 = ownSha;
  if (view.own?.kind === 'dropin') value.dropin_sha256 = ownSha;
  if (view.enabled) value.enabled = s.UnitFileState === 'enabled';
  if (view.active) value.active = LIVE.has(s.ActiveState ?? '');
  if (view.properties.length > 0) value.properties = Object.fromEntries(view.properties.map((p) => [p, s[p] ?? null]));
  const detail = describe(view, seen);
  if (view.active && (view.own !== null || view.restartOn.length > 0)) {
    const { after, evidence, stale } = startedAfter(view, seen);
    value.started_after = after;
    if (stale.length === 0) detail.evidence = evidence;
    else detail.not_taken = stale;
  }
  if (view.probe !== null && seen.probe !== null) {
    value.answers = 'answers' in seen.probe ? seen.probe.answers : null;
    detail.probe = 'said' in seen.probe ? seen.probe.said : seen.probe.refused;
  }
  return { value, detail };
}

/**
 * For each piece of content the process loads, the sha256 of the bytes its main process started
 * after; null for a piece it did not take, with the reason. Datum's own file counts only once the
 * manager loaded it with no reload pending: `show` reports the loaded configuration, the process
 * has what was loaded when it started.
 */
function startedAfter(view: UnitView, seen: Seen): { after: Record<string, Json>; evidence: string; stale: string[] } {
  const s = seen.show;
  const start = startedUs(view.name, s);
  const after: Record<string, Json> = {};
  const stale: string[] = [];
  const taken: string[] = [];
  const take = (piece: string, read: Read | 'absent' | InTheWay | { problem: string } | null, extra: string | null) => {
    after[piece] = null;
    if (!isRead(read))
      stale.push(
        `${piece} ${read === 'absent' || read === null ? 'is not there' : 'problem' in read ? read.problem : `is a ${read.kind}`}`,
      );
    else if (extra !== null) stale.push(extra);
    else if (start === null) stale.push(`${piece}: no process of the unit is running`);
    else if (start <= read.placedUs)
      stale.push(
        `${piece} was put in place ${formatTimestampUs(read.placedUs)}, after the process started ${formatTimestampUs(start)}`,
      );
    else {
      after[piece] = read.sha256;
      taken.push(`${piece} (in place ${formatTimestampUs(read.placedUs)})`);
    }
  };
  if (view.own !== null) take(view.own.rel, seen.own, ownNotLoaded(view, seen));
  for (const input of seen.inputs) take(input.key, input.read, null);
  const who = view.name.endsWith('.service') ? `main process ${s.MainPID ?? '?'}` : view.name;
  const pending = view.own === null ? '' : ', with no reload pending';
  const evidence = `${who} started ${start === null ? '?' : formatTimestampUs(start)}, after ${taken.join(' and ')} (ctime)${pending}`;
  return { after, evidence, stale };
}

/** Why the manager does not have Datum's own file loaded; null when it does. */
function ownNotLoaded(view: UnitView, seen: Seen): string | null {
  if (view.own === null) return null;
  if (seen.show.NeedDaemonReload === 'yes')
    return `${view.own.rel} changed since the manager loaded the unit (NeedDaemonReload=yes)`;
  if (loadedOwn(view, seen)) return null;
  return view.own.kind === 'content'
    ? `the manager loaded ${seen.show.FragmentPath || 'no unit file'}, not ${ownPath(seen.units, view.own.rel)}`
    : `${view.own.rel} is not among the drop-ins the manager loaded (${seen.show.DropInPaths || 'none'}); a new drop-in directory needs a reload that systemd before 256 does not report (NeedDaemonReload, systemd #31752)`;
}

function describe(view: UnitView, seen: Seen): Record<string, Json> {
  const s = seen.show;
  const start = startedUs(view.name, s);
  const detail: Record<string, Json> = {
    name: view.name,
    manager: seen.units.manager,
    units_directory: seen.units.dir,
    units_directory_from: seen.units.from,
    load_state: s.LoadState ?? null,
    active_state: s.ActiveState ?? null,
    sub_state: s.SubState ?? null,
    unit_file_state: s.UnitFileState ?? null,
    need_daemon_reload: s.NeedDaemonReload ?? null,
    fragment_path: s.FragmentPath || null,
    drop_in_paths: s.DropInPaths ? s.DropInPaths.split(' ') : [],
    main_pid: Number(s.MainPID ?? 0),
    started_at: start === null ? null : formatTimestampUs(start),
    invocation_id: s.InvocationID || null,
  };
  if (s.Id && s.Id !== view.name) detail.alias_of = s.Id;
  if (s.LoadError && s.LoadState !== 'loaded') detail.load_error = s.LoadError;
  if (view.own !== null) detail.own_file = ownPath(seen.units, view.own.rel);
  if (view.enabled && s.UnitFileState === 'static')
    detail.enable_note = 'static: the unit has no [Install] section, so enabling it does nothing';
  for (const p of view.properties) if (!(p in s)) detail[`property_${p}`] = 'the manager shows no such property';
  return detail;
}

/**
 * What only a destructive change could clear, so no repair is planned: something that is not a
 * regular file where Datum's file goes, a unit an operator masked, or (for a whole unit file) a
 * unit file the manager ranks above the units directory.
 */
async function obstruction(view: UnitView, seen: Seen): Promise<string | null> {
  const s = seen.show;
  const where = view.own === null ? '' : ownPath(seen.units, view.own.rel);
  if (seen.own !== null && seen.own !== 'absent' && !isRead(seen.own))
    return withFix(
      `"${where}" is a ${seen.own.kind}, not a regular file; writing Datum's ${view.own!.kind === 'content' ? 'unit file' : 'drop-in'} would replace it and destroy what is there`,
      `move "${where}" away by hand if it is not needed (systemctl unmask ${view.name} if it is a mask), then let Datum write it`,
    );
  if (s.LoadState === 'masked' && (view.own !== null || view.enabled || view.active))
    return withFix(
      `${view.name} is masked (${s.FragmentPath || '/dev/null'}): starting or enabling it would need unmasking, which undoes an operator's decision that it must not run`,
      `an operator unmasks it (systemctl${seen.units.manager === 'user' ? ' --user' : ''} unmask ${view.name}) if it should run, or removes the unit from desired state`,
    );
  if (view.own?.kind !== 'content' || !s.FragmentPath || s.FragmentPath === where) return null;
  const paths = await unitPath(seen.units.manager);
  const rank = (dir: string) => paths.indexOf(dir);
  const theirs = rank(path.dirname(s.FragmentPath));
  const ours = rank(seen.units.dir);
  if (theirs < 0 || ours < 0 || theirs >= ours) return null;
  return withFix(
    `${view.name} is defined by ${s.FragmentPath}, which the manager ranks above ${seen.units.dir}: Datum's unit file would never be loaded, and only removing the other one would change that`,
    `an operator removes or moves ${s.FragmentPath} if Datum should own the unit, or desired state declares a drop-in instead of content`,
  );
}

/** Whether `dir` is in the manager's unit search path; the paths when it is not. */
export async function unitsDirProblem(units: UnitsDir): Promise<string[] | null> {
  const paths = await unitPath(units.manager);
  return paths.includes(units.dir) ? null : paths;
}
