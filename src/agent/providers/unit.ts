import path from 'node:path';
import { ownFile, unitNameProblem, type ResourceSpec, type UnitSpec } from '../../domain';
import { withFix } from '../../contract';
import { AgentRefusal } from '../refusal';
import type { AgentConfig } from '../../schemas';
import { admit, applyUnit, unitApplySpec, type UnitApplySpec } from '../units/apply';
import { ownPath, readOwnFile, unitsDir } from '../units/files';
import { observeUnit, unitMarker, type UnitView } from '../units/observe';
import { ManagerUnreachable, UNIT_PROPERTIES, managerRuntimeDir, readUnitState } from '../units/systemctl';
import { subdirsOf, watchDir } from '../fs';
import { now, specOf, type ImportResult, type NodeContext, type Provider } from './types';

/*
 * unit: a systemd unit, observed from its manager and Datum's own file of it (src/agent/units/),
 * changed only through unit.apply: Datum's unit file or drop-in, a reload, enable, start or
 * restart. Deleting, disabling and stopping destroy something and are never done.
 */

export const unitProvider: Provider<UnitSpec> = {
  actions: ['unit.apply'],
  destructive: ['unit.delete', 'unit.disable', 'unit.stop'],
  observe: (ctx, _key, spec) => observeUnit(ctx.config, ctx.root, viewOfSpec(spec, ctx.resources ?? {})),
  apply: (ctx, action, atWrite) => {
    const spec = specOf(action, unitApplySpec);
    return applyUnit(ctx, action.resource_key, spec, viewOfAction(spec), now, atWrite);
  },
  targetNow: (ctx, action) => {
    const view = viewOfAction(specOf(action, unitApplySpec));
    admit(ctx.config, view);
    return observeUnit(ctx.config, ctx.root, view);
  },
  watch: {
    marker: (_root, _key, spec, config) => watchMarker(config, viewOfSpec(spec, {})),
    // Datum's own file (a hand edit is seen at once); the manager's state wakes it through unitWake.
    dirs: (_root, _key, spec, config) => {
      const own = ownFile(spec);
      if (own === null || unitNameProblem(spec.name) !== null) return [];
      const units = unitsDir(config);
      return [units.dir, ...(own.kind === 'dropin' ? [path.dirname(ownPath(units, own.rel))] : [])];
    },
    wake: (_root, _key, spec, poke, config) => unitWake(config, spec, poke),
  },
  importSpec,
};

/** What observe reads of a unit as desired state declares it; restart_on keys become the paths of their file resources. */
export function viewOfSpec(spec: UnitSpec, resources: Record<string, ResourceSpec>): UnitView {
  return {
    name: spec.name,
    own: ownFile(spec),
    enabled: spec.enabled === true,
    active: spec.active === true,
    properties: Object.keys(spec.properties ?? {}).sort(),
    restartOn: (spec.restart_on ?? []).map((key) => {
      const file = resources[key];
      return { key, path: file?.type === 'file' ? file.path : null };
    }),
    probe: spec.probe ?? null,
  };
}

/** The same from an action's write spec: what its target is, and what observe must show once it took. */
export function viewOfAction(spec: UnitApplySpec): UnitView {
  const expect = spec.expect !== null && typeof spec.expect === 'object' && !Array.isArray(spec.expect) ? spec.expect : {};
  const props = expect.properties;
  const properties = props !== null && typeof props === 'object' && !Array.isArray(props) ? Object.keys(props).sort() : [];
  const bad = properties.find((p) => !/^[A-Z][A-Za-z0-9]{1,63}$/.test(p));
  if (bad !== undefined)
    throw new AgentRefusal(
      'InvalidAction',
      withFix(`its spec expects a property ${JSON.stringify(bad)}, which is no property name`, 're-plan from the desired state'),
    );
  const own = spec.file === null ? null : ownFile({ name: spec.name, [spec.file.kind]: spec.file.content });
  return {
    name: spec.name,
    own,
    enabled: spec.enable,
    active: spec.start,
    properties,
    restartOn: spec.restart_on,
    probe: spec.probe,
  };
}

/**
 * The watch's marker: observe's, then the unit's running state, which observe's marker leaves out
 * (a crash is no writer) but which should wake the loop all the same. sameMarker compares the two
 * spellings on the parts both carry.
 */
async function watchMarker(config: AgentConfig | undefined, view: UnitView): Promise<string> {
  if (unitNameProblem(view.name) !== null) return 'unit:invalid';
  const units = unitsDir(config);
  try {
    const show = await readUnitState(units.manager, view.name, [...UNIT_PROPERTIES, ...view.properties]);
    const own = view.own === null ? null : await readOwnFile(units, view.own.rel);
    return `${unitMarker(view, { show, own })}|${show.ActiveState ?? ''}:${show.MainPID ?? ''}:${show.InvocationID ?? ''}`;
  } catch (err) {
    if (err instanceof ManagerUnreachable) return 'unit:unreachable';
    throw err;
  }
}

/** Links that enable a unit live in these subdirectories of a units directory. */
const ENABLEMENT = /\.(wants|requires|upholds)$/;
/** What a daemon-reload or a first set-property leaves in the manager's runtime directory. */
const RELOADED = /^generator|\.control$/;

/**
 * What wakes the watch for a unit, so that no poll asks systemctl about it every half second:
 *  - the manager's record of the unit's invocation (its start, restart, stop or death);
 *  - a daemon-reload (which is when edited files take effect) and a property set at runtime;
 *  - the directories of its files as the manager loaded them (its unit file, its drop-ins), of
 *    the links that enable it, and of the properties set persistently (<units>.control).
 * A change none of these sees waits for the safety poll. Blind, and so polled, when the manager
 * keeps no runtime directory where the agent looks, or does not answer.
 */
async function unitWake(config: AgentConfig, spec: UnitSpec, poke: () => void): Promise<(() => void) | 'blind' | null> {
  if (unitNameProblem(spec.name) !== null) return null;
  const units = unitsDir(config);
  const runtime = managerRuntimeDir(units.manager);
  const closers: Array<() => void> = [];
  const close = () => closers.forEach((stop) => stop());
  for (const [dir, only] of [
    [path.join(runtime, 'units'), (name: string) => name === `invocation:${spec.name}`],
    [runtime, (name: string) => RELOADED.test(name)],
  ] as const) {
    const stop = watchDir(dir, poke, only);
    if (stop === null) return (close(), 'blind');
    closers.push(stop);
  }
  let loaded: Record<string, string>;
  try {
    loaded = await readUnitState(units.manager, spec.name, ['FragmentPath', 'DropInPaths']);
  } catch (err) {
    close();
    if (err instanceof ManagerUnreachable) return 'blind';
    throw err;
  }
  const files = [loaded.FragmentPath ?? '', ...(loaded.DropInPaths ?? '').split(' ')].filter((p) => path.isAbsolute(p));
  const control = `${units.dir}.control`;
  const dirs = new Set([
    ...files.map((f) => path.dirname(f)),
    ...(await subdirsOf(units.dir, (name) => ENABLEMENT.test(name))),
    control,
    path.join(control, `${spec.name}.d`),
  ]);
  for (const dir of dirs) {
    const stop = watchDir(dir, poke);
    if (stop) closers.push(stop);
  }
  // The control directory made later: its parent sees it come.
  const made = watchDir(path.dirname(units.dir), poke, (name) => name === path.basename(control));
  if (made) closers.push(made);
  return close;
}

/**
 * `datum import`: the unit as it is, as its name, whether it is enabled and whether it runs. Its
 * files and properties are the host's as they are; an adopting author adds what Datum should own.
 */
async function importSpec(ctx: NodeContext, _key: string, name: string): Promise<ImportResult<UnitSpec>> {
  const problem = unitNameProblem(name);
  if (problem !== null) return { problem: `unit name ${JSON.stringify(name)} ${problem}` };
  const units = unitsDir(ctx.config);
  let show: Record<string, string>;
  try {
    show = await readUnitState(units.manager, name, ['Id', 'LoadState', 'ActiveState']);
  } catch (err) {
    if (err instanceof ManagerUnreachable) return { problem: err.message };
    throw err;
  }
  if (show.LoadState === 'not-found') return { problem: `the ${units.manager} manager knows no unit ${name}` };
  if (show.Id && show.Id !== name) return { problem: `${name} is another name of ${show.Id}: import ${show.Id}` };
  return {
    spec: {
      type: 'unit',
      name,
      ...(show.UnitFileState === 'enabled' ? { enabled: true as const } : {}),
      ...(show.ActiveState === 'active' || show.ActiveState === 'reloading' ? { active: true as const } : {}),
    },
  };
}
