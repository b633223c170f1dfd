import { jsonEqual, sha256Hex, type Json } from '../canonical';
import type { Assessment } from '../assessment';
import type { ResourceSpec, UnitSpec } from '../../contract/desired';
import { fileBytes } from './common';
import { stringField, type ResourceKind } from './kind';

/*
 * unit: a systemd unit, observed from its manager (`systemctl show`), never from a status line.
 * Its value holds only what the spec declares: the sha256 of Datum's unit file or drop-in, whether
 * it is enabled and active, the declared properties as the manager shows them, and `started_after`:
 * for each piece of content the unit's process loads (Datum's file, each restart_on file), the
 * sha256 of the bytes its main process started after. `show` reports the configuration the
 * manager loaded, not what the running process has (reach-facts S2): a reload without a restart
 * leaves the process on the old content. So a unit is current only when the manager loaded
 * Datum's file, no reload is pending, and the main process started after the content was in
 * place; a probe that answers is liveness, reported as `answers`, and never stands for content.
 *
 * The marker is what another writer changes (Datum's file, UnitFileState, the declared
 * properties, the files the manager loaded), not ActiveState or the main pid: a unit that crashed
 * failed, and starting it again is a repair, not a fight with another writer.
 */

/** The unit types Datum manages (systemd's own list has device and scope too: the kernel's and transient). */
export const UNIT_TYPES = ['service', 'socket', 'timer', 'path', 'target', 'mount', 'automount', 'swap', 'slice'] as const;

/** The name of the drop-in Datum owns in <units.directory>/<name>.d/. */
export const DROPIN_NAME = '50-datum.conf';

/** systemd's UNIT_NAME_MAX is 256 with the NUL. */
const UNIT_NAME_MAX = 255;

/**
 * Why `name` is no unit name Datum manages; null when it is one. systemctl mangles an invalid name
 * into another one and expands globs instead of refusing them (reach-facts S5), so Datum accepts
 * only what systemd's unit_name_is_valid() accepts, minus what reads as an option or a hidden
 * file, a template itself, and Datum's own units.
 */
export function unitNameProblem(name: string): string | null {
  if (name === '') return 'is empty';
  if (name.length > UNIT_NAME_MAX) return `is ${name.length} characters long; systemd allows at most ${UNIT_NAME_MAX}`;
  if (name.startsWith('-') || name.startsWith('.'))
    return `starts with "${name[0]}", which would read as an option or a hidden file`;
  const dot = name.lastIndexOf('.');
  const type = dot < 0 ? '' : name.slice(dot + 1);
  if (!(UNIT_TYPES as readonly string[]).includes(type))
    return `does not end in a unit type Datum manages (.${UNIT_TYPES.join(', .')})`;
  const stem = name.slice(0, dot);
  const bad = /[^A-Za-z0-9:_.@\\-]/u.exec(stem) ?? /\\(?!x[0-9a-f]{2})/.exec(stem);
  if (bad) return `holds ${JSON.stringify(bad[0])}, which systemd would escape or mangle into another unit's name`;
  if (stem.startsWith('@') || stem === '') return 'has no name before its type or its @';
  if (stem.endsWith('@')) return `is a template, which runs nothing itself; name an instance such as ${stem}instance.${type}`;
  if (name.startsWith('datum-'))
    return 'starts with "datum-", which names the agent\'s own unit and the units of its managed services';
  return null;
}

/** Properties Datum reads itself, or that change as the unit runs: declaring one would make a crash look like another writer. */
const RUNTIME_PROPERTIES = new Set([
  'Id',
  'Names',
  'LoadState',
  'LoadError',
  'ActiveState',
  'SubState',
  'FreezerState',
  'UnitFileState',
  'UnitFilePreset',
  'NeedDaemonReload',
  'FragmentPath',
  'SourcePath',
  'DropInPaths',
  'MainPID',
  'ControlPID',
  'ExecMainPID',
  'ExecMainCode',
  'ExecMainStatus',
  'InvocationID',
  'Result',
  'StatusText',
  'StatusErrno',
  'NRestarts',
  'Job',
  'ControlGroup',
  'ControlGroupId',
  'ConditionResult',
  'AssertResult',
]);
const RUNTIME_PATTERN = /(Timestamp|TimestampMonotonic|Current|Peak|Available|NSec|Bytes|Packets|Operations)$/;

/** Why `name` cannot be a declared property; null when it can. */
export function unitPropertyProblem(name: string): string | null {
  if (!/^[A-Z][A-Za-z0-9]{1,63}$/.test(name)) return 'is not a unit property name (CamelCase, as systemctl show prints it)';
  if (RUNTIME_PROPERTIES.has(name) || RUNTIME_PATTERN.test(name))
    return 'is state the unit has while it runs, or that Datum observes itself (declare enabled or active instead)';
  return null;
}

/** Where Datum's own file of the unit is, relative to the units directory: its name, or its drop-in. */
export function ownFile(spec: Pick<UnitSpec, 'name' | 'content' | 'dropin'>): { kind: 'content' | 'dropin'; rel: string } | null {
  if (spec.content !== undefined) return { kind: 'content', rel: spec.name };
  if (spec.dropin !== undefined) return { kind: 'dropin', rel: `${spec.name}.d/${DROPIN_NAME}` };
  return null;
}

/** The properties as `systemctl show` prints them (a number as its decimal digits). */
const shown = (properties: Record<string, string | number>): Record<string, string> =>
  Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, String(v)]));

/** The desired sha256 of a restart_on file: what desired state gives it. */
const fileDigest = (spec: ResourceSpec | undefined): Json => (spec?.type === 'file' ? sha256Hex(fileBytes(spec.content)) : null);

/** Whether the unit must prove its process took its content: it runs, and there is content to take. */
const provesContent = (spec: UnitSpec) => spec.active === true && (ownFile(spec) !== null || (spec.restart_on?.length ?? 0) > 0);

function desiredUnit(spec: UnitSpec, restartOn: (key: string) => Json): Json {
  const own = ownFile(spec);
  const content = spec.content ?? spec.dropin;
  const value: Record<string, Json> = {};
  if (spec.content !== undefined) value.content_sha256 = sha256Hex(spec.content);
  if (spec.dropin !== undefined) value.dropin_sha256 = sha256Hex(spec.dropin);
  if (spec.enabled) value.enabled = true;
  if (spec.active) value.active = true;
  if (spec.properties) value.properties = shown(spec.properties);
  if (provesContent(spec)) {
    const after: Record<string, Json> = {};
    if (own && content !== undefined) after[own.rel] = sha256Hex(content);
    for (const key of spec.restart_on ?? []) after[key] = restartOn(key);
    value.started_after = after;
  }
  if (spec.probe) value.answers = true;
  return value;
}

/** What a unit.apply writes on its target, from the desired spec and from an action alike. */
const writtenValue = (file: Json, enabled: boolean, active: boolean): Json => ({ file, enabled, active });

export const unit: ResourceKind<UnitSpec> = {
  // After the files its process loads (restart_on), so a restart in the same pass sees them written.
  order: 3,
  actions: ['unit.apply'],
  destructive: ['unit.delete', 'unit.disable', 'unit.stop'],
  target: (_key, spec) => `unit:${spec.name}`,
  targetOfAction: (_key, spec) => {
    const name = stringField(spec, 'name');
    return name === null ? null : `unit:${name}`;
  },
  targetIsKey: false,
  targetIsPath: false,
  // Its value is never null for a failure: a stopped or crashed unit shows active: false under an unmoved marker.
  absenceIsFailure: false,
  targetNameProblem: (entry, rest) => {
    const problem = unitNameProblem(rest);
    return problem === null ? null : `"${entry}" names no unit: the name ${problem}`;
  },
  desiredValue: (_key, spec, resources) => desiredUnit(spec, (key) => fileDigest(resources[key])),
  written: (_key, spec) => {
    const own = ownFile(spec);
    const content = spec.content ?? spec.dropin;
    return writtenValue(
      own && content !== undefined ? { kind: own.kind, sha256: sha256Hex(content) } : null,
      spec.enabled === true,
      spec.active === true,
    );
  },
  writtenByAction: (_kind, spec) => {
    const file = spec.file;
    const own =
      file && typeof file === 'object' && !Array.isArray(file) ? { kind: file.kind ?? null, sha256: file.sha256 ?? null } : null;
    return writtenValue(own, spec.enable === true, spec.start === true);
  },
  valueAfter: (_kind, spec) => spec.expect,
  // Datum's own file holds the action's bytes: the write landed, and the reload or restart after it did not.
  partlyLanded: (_kind, spec, value) => {
    const file = spec.file;
    if (!file || typeof file !== 'object' || Array.isArray(file) || !value || typeof value !== 'object' || Array.isArray(value))
      return false;
    const field = file.kind === 'content' ? 'content_sha256' : 'dropin_sha256';
    return typeof file.sha256 === 'string' && value[field] === file.sha256;
  },
  plan: (a, spec, intent) => {
    const own = ownFile(spec);
    const content = spec.content ?? spec.dropin;
    return {
      action: 'unit.apply',
      spec: {
        name: spec.name,
        file: own && content !== undefined ? { kind: own.kind, content, sha256: sha256Hex(content) } : null,
        enable: spec.enabled === true,
        start: spec.active === true,
        restart_on: (spec.restart_on ?? []).map((key) => {
          const file = intent.resources[key];
          return { key, path: file?.type === 'file' ? file.path : null };
        }),
        probe: spec.probe ?? null,
        // What observe must show once the action took (refine: inputs an operator owns as they are).
        expect: a.desired,
      },
    };
  },
  unsigned: ['expect'],
  dependencies: (spec) => spec.restart_on ?? [],
  references: (spec) => (spec.restart_on ?? []).map((key, i) => ({ field: `restart_on.${i}`, key, type: 'file' as const })),
  refine: withUnitInputs,
};

/**
 * A unit's process should have started after the content its node is meant to hold: the desired
 * bytes of a restart_on file Datum manages, and what is on disk where an operator owns it
 * ("managed convergence is evaluated without" operator-owned state), as for a service's config.
 */
function withUnitInputs(a: Assessment, spec: UnitSpec, all: Assessment[]): Assessment {
  if (!provesContent(spec) || (spec.restart_on?.length ?? 0) === 0) return a;
  const desired = desiredUnit(spec, (key) => {
    const dep = all.find((d) => d.resource_key === key);
    if (!dep) return null;
    // By ownership only, never by mode: observe must plan exactly what enforce would.
    return dep.ownership === 'MANAGED' ? dep.desired : (dep.observed?.value ?? null);
  });
  const drift = a.ownership === 'UNKNOWN' && !a.observed ? false : !jsonEqual(a.observed?.value ?? null, desired);
  return { ...a, desired, drift };
}
