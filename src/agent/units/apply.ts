import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { unitProbe } from '../../schemas/resources/unit';
import { unitNameProblem } from '../../domain';
import { withFix } from '../../contract';
import { assertProbeAllowed, assertUnitAllowed } from '../allow';
import { DirectorySwapped, HeldDir, replaceIn, sha256 } from '../fs';
import { AgentRefusal, UNIT_CHANGE_FAILED } from '../refusal';
import type { ApplyResult, AtWrite, NodeContext } from '../providers/types';
import { short } from '../providers/types';
import { ownPath, readOwnFile, unitsDir, type UnitsDir } from './files';
import { runProbe } from './probe';
import { observeUnit, ownPartOf, startedUs, unitsDirProblem, type UnitView } from './observe';
import {
  ManagerUnreachable,
  UNIT_PROPERTIES,
  change,
  changeArgv,
  readUnitState,
  reloadArgv,
  afterJob,
  jobUnderWay,
  showUnit,
  type Manager,
} from './systemctl';

/*
 * unit.apply, in order: Datum's own file written if it differs (atomically, the replaced bytes
 * kept under .datum/backup/), the manager reloaded when its loaded view is not the files on disk,
 * the unit enabled, then started, or restarted when its process did not start after its content
 * was in place. Everything that changes the host runs in one `atWrite` step, so the fence and the
 * marker are checked again at that moment; the start is queued there (--no-block) and waited for
 * after it, so an observe of the node never waits on a slow unit's start.
 *
 * Before any of it the agent checks on its own what no workflow can vouch for: the name is a
 * unit name (else systemctl would act on another unit), the host allows the unit and its probe,
 * the name is the unit's own (an alias would let an allowed name reach another unit), and the
 * units directory is one the manager loads.
 */

export const unitApplySpec = z.strictObject({
  name: z.string(),
  file: z
    .strictObject({ kind: z.enum(['content', 'dropin']), content: z.string(), sha256: z.string().regex(/^[a-f0-9]{64}$/) })
    .nullable(),
  enable: z.boolean(),
  start: z.boolean(),
  restart_on: z.array(z.strictObject({ key: z.string(), path: z.string().nullable() })),
  probe: unitProbe.nullable(),
  expect: z.json(),
});
export type UnitApplySpec = z.infer<typeof unitApplySpec>;

/** How long a queued start is waited for (a unit's own start timeout is 90 s by default). */
export const START_WAIT_MS = 90_000;

/** How long a started unit's probe is given to answer before the apply reports what it found. */
export const READY_WAIT_MS = 10_000;

/** A unit file or drop-in's size cap, the same as desired state's. */
const UNIT_TEXT_MAX = 1024 * 1024;

export async function applyUnit(
  ctx: NodeContext,
  resourceKey: string,
  spec: UnitApplySpec,
  view: UnitView,
  now: () => Date,
  atWrite: AtWrite,
): Promise<ApplyResult> {
  const units = unitsDir(ctx.config);
  await assertMayAct(ctx, resourceKey, spec, view, units);
  const done: string[] = [];
  let restarted = false;
  await atWrite(async (checked) => {
    let wrote = false;
    if (spec.file !== null && view.own !== null) wrote = await writeOwn(ctx, units, view, spec.file.content, checked, now, done);
    const show = await showNow(units.manager, view);
    const needReload = wrote || show.NeedDaemonReload === 'yes' || (view.own !== null && !loaded(view, units, show));
    if (needReload) {
      await change(units.manager, reloadArgv(units.manager), 'daemon-reload', view.name);
      done.push('reloaded the manager');
    }
    const fresh = needReload ? await showNow(units.manager, view) : show;
    if (wrote) crashPointForTests('unit.written');
    if (spec.enable && fresh.UnitFileState !== 'enabled') {
      await change(units.manager, changeArgv(units.manager, 'enable', view.name), `enable ${view.name}`, view.name);
      done.push(`enabled ${view.name}`);
    }
    if (spec.start) restarted = await startOrRestart(ctx, units.manager, view, fresh, done);
  });
  if (restarted) await settle(units.manager, view);
  const after = await observeUnit(ctx.config, ctx.root, view);
  return { marker_after: after.marker, detail: report(view, done, after) };
}

/**
 * A test seam, inert unless DATUM_TEST_CRASH_AT names this point: the agent kills itself with
 * SIGKILL there, between Datum's file written and the unit restarted.
 */
function crashPointForTests(point: 'unit.written'): void {
  if (process.env.DATUM_TEST_CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}

/**
 * What the agent refuses before it reads anything of the unit (compare-and-swap reads it too, so
 * this runs first there as well): a name that is no unit name, a unit or a probe the host's
 * agent.yaml does not allow.
 */
export function admit(config: NodeContext['config'], view: UnitView): void {
  const problem = unitNameProblem(view.name);
  if (problem !== null)
    throw new AgentRefusal(
      'InvalidAction',
      withFix(`unit name ${JSON.stringify(view.name)} ${problem}; nothing was run`, 'correct the unit name in desired state'),
      { unit: view.name },
    );
  assertUnitAllowed(config, view.name);
  if (view.probe !== null) assertProbeAllowed(config, view.name, view.probe);
}

/** What the agent checks on its own before anything changes; each a refusal, so nothing has changed when one throws. */
async function assertMayAct(ctx: NodeContext, resourceKey: string, spec: UnitApplySpec, view: UnitView, units: UnitsDir) {
  admit(ctx.config, view);
  if (spec.file !== null) {
    const size = Buffer.byteLength(spec.file.content);
    if (size > UNIT_TEXT_MAX)
      throw new AgentRefusal(
        'SizeLimitExceeded',
        withFix(`unit.apply of "${resourceKey}" carries ${size} bytes of unit file`, 'keep the unit file to its directives'),
      );
    if (sha256(spec.file.content) !== spec.file.sha256)
      throw new AgentRefusal(
        'InvalidAction',
        withFix(
          `unit.apply of "${resourceKey}" carries content whose sha256 is not the ${spec.file.sha256} it claims`,
          'the action was corrupted in transit; re-plan from the desired state',
        ),
      );
  }
  await assertUnitItself(spec, view, units);
}

/** The manager's own view: the name is the unit's own (not an alias), it is not masked, and Datum's directory is one it loads. */
async function assertUnitItself(spec: UnitApplySpec, view: UnitView, units: UnitsDir): Promise<void> {
  let show: Record<string, string>;
  try {
    show = await showUnit(units.manager, view.name, ['Id', 'LoadState', 'FragmentPath']);
  } catch (err) {
    if (err instanceof ManagerUnreachable)
      throw new AgentRefusal(
        UNIT_CHANGE_FAILED,
        withFix(err.message, 'check that systemd runs on this host and that units.manager in agent.yaml names it'),
      );
    throw err;
  }
  if (show.LoadState !== 'not-found' && show.Id && show.Id !== view.name)
    throw new AgentRefusal(
      'InvalidAction',
      withFix(
        `"${view.name}" is another name of ${show.Id} (systemctl show Id), and one unit has one name in desired state`,
        `declare the unit by its own name, ${show.Id} (which agent.yaml's allow.units must allow)`,
      ),
      { unit: view.name, id: show.Id },
    );
  if (show.LoadState === 'masked')
    throw new AgentRefusal(
      'DestructiveActionRefusal',
      withFix(
        `${view.name} is masked (${show.FragmentPath || '/dev/null'}); acting on it would need unmasking, which undoes an operator's decision that it must not run`,
        `an operator unmasks it (systemctl${units.manager === 'user' ? ' --user' : ''} unmask ${view.name}) if it should run`,
      ),
      { unit: view.name },
    );
  if (spec.file !== null) {
    const paths = await unitsDirProblem(units);
    if (paths !== null)
      throw new AgentRefusal(
        'InvalidAgentConfig',
        withFix(
          `the units directory ${units.dir} (${units.from}) is not one the ${units.manager} manager loads units from (${paths.join(' ')}), so Datum's file there would never take effect`,
          "set units.directory in agent.yaml to a directory of the manager's unit path (/etc/systemd/system for the system manager)",
        ),
        { units_directory: units.dir },
      );
  }
}

/** Writes Datum's own file when what is there differs; whether it wrote. Runs inside atWrite. */
async function writeOwn(
  ctx: NodeContext,
  units: UnitsDir,
  view: UnitView,
  content: string,
  checked: string | null | undefined,
  now: () => Date,
  done: string[],
): Promise<boolean> {
  const own = view.own!;
  const current = await readOwnFile(units, own.rel);
  if (current !== 'absent' && 'sha256' in current && current.sha256 === sha256(content)) return false;
  const [first, second] = own.rel.split('/');
  const shown = ownPath(units, own.rel);
  let top: HeldDir;
  try {
    top = await HeldDir.open(units.dir);
  } catch (err) {
    throw inTheWay(shown, err);
  }
  try {
    const dir = second === undefined ? top.view() : await childDir(top, first, shown);
    try {
      const replaced = await replaceIn(
        ctx.root,
        dir,
        second ?? first,
        { type: 'unit', rel: shown, target: `units/${units.manager}/${own.rel}` },
        content,
        ownPartOf(checked),
        now,
      );
      done.push(
        `wrote ${shown} (sha256 ${short(replaced.sha256)})${replaced.previous ? `, replacing ${replaced.previous.size} bytes kept at .datum/backup/${replaced.previous.backup}` : ''}`,
      );
      return true;
    } finally {
      await dir.close();
    }
  } finally {
    await top.close();
  }
}

async function childDir(top: HeldDir, name: string, shown: string): Promise<HeldDir> {
  try {
    return await top.child(name, true);
  } catch (err) {
    throw inTheWay(shown, err);
  }
}

function inTheWay(shown: string, err: unknown): unknown {
  if (!(err instanceof DirectorySwapped)) return err;
  return new AgentRefusal(
    'DestructiveActionRefusal',
    withFix(
      `a directory on the way to "${shown}" is not a plain directory (a symlink, or replaced while Datum worked); writing through it would reach somewhere else`,
      'replace it with a real directory by hand, then let Datum write the unit',
    ),
    { path: shown },
  );
}

const showNow = (manager: Manager, view: UnitView) => readUnitState(manager, view.name, [...UNIT_PROPERTIES, ...view.properties]);

function loaded(view: UnitView, units: UnitsDir, show: Record<string, string>): boolean {
  if (view.own === null) return true;
  const abs = ownPath(units, view.own.rel);
  return view.own.kind === 'content' ? show.FragmentPath === abs : (show.DropInPaths ?? '').split(' ').includes(abs);
}

/**
 * Starts a unit that is not running; restarts one whose process started before its content
 * was in place (Datum's file, a restart_on file), or whose probe does not answer. Queued with
 * --no-block: the job is the irreversible step, its outcome is waited for outside the fence.
 */
async function startOrRestart(
  ctx: NodeContext,
  manager: Manager,
  view: UnitView,
  show: Record<string, string>,
  done: string[],
): Promise<boolean> {
  const seen = await observeUnit(ctx.config, ctx.root, view);
  const value = seen.value as Record<string, unknown> | null;
  const after = (value?.started_after ?? {}) as Record<string, unknown>;
  const stale = Object.values(after).some((v) => v === null);
  const running = startedUs(view.name, show) !== null;
  const silent = value?.answers === false;
  if (running && !stale && !silent) return false;
  const verb = running ? 'restart' : 'start';
  await change(manager, changeArgv(manager, verb, view.name), `${verb} ${view.name}`, view.name);
  done.push(
    `${verb === 'start' ? 'started' : 'restarted'} ${view.name}${running ? (stale ? ' (its process started before its content was in place)' : ' (its probe did not answer)') : ''}`,
  );
  return true;
}

/**
 * Waits until the queued job is done (the unit neither activating nor deactivating), then, for a
 * unit with a probe, until the probe answers (a Type=exec unit is active as soon as its program
 * runs, before it listens): START_WAIT_MS for the job, READY_WAIT_MS for the probe. What is still
 * not so then is what the next observe reports.
 */
async function settle(manager: Manager, view: UnitView): Promise<void> {
  const show = await afterJob(() => showUnit(manager, view.name, ['ActiveState', 'SubState', 'Job']), START_WAIT_MS);
  if (jobUnderWay(show)) return;
  if (view.probe === null) return;
  const ready = Date.now() + READY_WAIT_MS;
  while (!(await runProbe(view.probe)).answers && Date.now() < ready) await sleep(150);
}

function report(view: UnitView, done: string[], after: { detail: Record<string, unknown> }): string {
  const did = done.length > 0 ? done.join(', then ') : `nothing needed doing for ${view.name}`;
  const d = after.detail;
  const state = `${view.name} is ${String(d.active_state)} (${String(d.sub_state)}), ${String(d.unit_file_state) || 'no unit file state'}`;
  const evidence =
    typeof d.evidence === 'string'
      ? `; ${d.evidence}`
      : Array.isArray(d.not_taken)
        ? `; not taken: ${(d.not_taken as string[]).join('; ')}`
        : '';
  const probe = typeof d.probe === 'string' ? `; probe: ${d.probe}` : '';
  return `${did}. ${state}${evidence}${probe}.`;
}
