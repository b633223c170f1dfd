import path from 'node:path';
import { z } from 'zod';
import { canonicalJson, type Json, type ObservedResource, type ServiceSpec } from '../../domain';
import { sha256, checkFileResourcePath, locate } from '../fs';
import { withFix } from '../../contract';
import { AgentRefusal } from '../refusal';
import { serviceMarker } from '../markers';
import {
  adoptInterrupted,
  onChildExit,
  readServiceState,
  startTicks,
  capServiceLog,
  describeInstance,
  launch,
  probeHealth,
  readServiceRecord,
  stopInstance,
  unverified,
  verifyIdentity,
  waitHealthy,
  type Health,
  type ServiceState,
} from '../services';
import { currentReleaseDir } from './release';
import {
  now,
  observeGuarded,
  observed,
  short,
  specOf,
  type ApplyResult,
  type AtWrite,
  type NodeContext,
  type Provider,
} from './types';

/*
 * service: observed from the running process's own health endpoint — the build and config
 * digest it reports it loaded — never from the process merely being alive (a node alive on 7.3
 * is not converged to 7.4). Marker: pid + start time. Start and restart are the ordinary path;
 * killing without a restart is destructive and not something this provider does.
 */

export const serviceRunSpec = z.strictObject({
  command: z.array(z.string().min(1)).min(1),
  build: z.json(),
  config_path: z.string().nullable(),
  config_sha256: z.json(),
});
export type ServiceRunSpec = z.infer<typeof serviceRunSpec>;

export const serviceProvider: Provider<ServiceSpec> = {
  actions: ['service.start', 'service.restart'],
  destructive: ['service.kill'],
  observe: (ctx, key) => observeService(ctx, key),
  apply: (ctx, action, atWrite) =>
    applyServiceRun(ctx, action.resource_key, action.action as ServiceRun, specOf(action, serviceRunSpec), now, atWrite),
  targetNow: (ctx, action) => observeService(ctx, action.resource_key),
  watch: {
    marker: (root, key) => serviceMarkerNow(root, key),
    dirs: (root) => [path.join(root, '.datum', 'services')],
    wake: async (root, key, _spec, poke) => {
      // A service with no instance recorded needs nothing: its start writes a state file, which inotify sees.
      const state = await readServiceState(root, key).catch(() => null);
      if (!state) return null;
      return (state.systemd ? null : onChildExit(state.pid, poke)) ?? 'blind';
    },
  },
};

type ServiceRun = 'service.start' | 'service.restart';

/** The running instance's pid and start time, or 'stopped': what the watch compares. */
async function serviceMarkerNow(root: string, key: string): Promise<string> {
  const state = await readServiceState(root, key).catch(() => null);
  if (!state) return 'stopped';
  const ticks = await startTicks(state.pid);
  return ticks !== null && ticks === state.start_ticks ? serviceMarker(state.pid, ticks) : 'stopped';
}

export const HEALTH_TIMEOUT_MS = 2000;
export const START_WAIT_MS = 10_000;

/** {build, config_sha256} as the service reports them, or null when it does not answer usefully. */
function reported(health: Health): Json {
  if (!health.ok) return null;
  const body = health.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return null;
  return { build: body.build ?? null, config_sha256: body.config_sha256 ?? null };
}

export async function observeService(ctx: NodeContext, key: string): Promise<ObservedResource> {
  return await observeGuarded('service', { running: false }, () => observeServiceNow(ctx, key));
}

async function observeServiceNow(ctx: NodeContext, key: string): Promise<ObservedResource> {
  let record: Awaited<ReturnType<typeof readServiceRecord>>;
  try {
    record = await readServiceRecord(ctx.root, key);
  } catch (err) {
    if (err instanceof AgentRefusal) return observed('service', null, null, { running: false, refusal: err.type }, err.message);
    throw err;
  }
  if (record.kind === 'absent') return observed('service', null, null, { running: false });
  if (record.kind === 'invalid') {
    const refusal = unverified(key, record.file, `the file is not a state file Datum wrote (${record.why})`);
    return observed('service', null, null, { running: false, refusal: refusal.type }, refusal.message);
  }
  const state = record.state;
  const identity = await verifyIdentity(ctx.root, state);
  if (identity.kind === 'foreign') {
    // Not the service, and not "stopped" either: something claims to be it. Reported, never signalled.
    const refusal = unverified(key, record.file, identity.why);
    return observed('service', null, null, { running: false, claimed_pid: state.pid, refusal: refusal.type }, refusal.message);
  }
  if (identity.kind === 'gone')
    return observed('service', null, null, { running: false, last_pid: state.pid, last_started_at: state.started_at });
  await capServiceLog(ctx.root, key);
  const health = await probeHealth(state.port, HEALTH_TIMEOUT_MS);
  const detail: Record<string, Json> = {
    running: true,
    pid: state.pid,
    port: state.port,
    started_at: state.started_at,
    command: state.command,
    cwd: state.cwd,
  };
  if (state.systemd !== undefined) detail.unit = state.systemd.unit;
  if (health.ok) detail.health = health.body;
  else detail.health_error = `GET /health ${health.error}`;
  return observed('service', reported(health), serviceMarker(state.pid, state.start_ticks!), detail);
}

/** What a launch is for: the same command in the same release with the same config is the same launch. */
const launchTag = (command: string[], cwd: string, configPath: string) => sha256(canonicalJson([command, cwd, configPath]));

export async function applyServiceRun(
  ctx: NodeContext,
  resourceKey: string,
  kind: ServiceRun,
  spec: ServiceRunSpec,
  now: () => Date,
  atWrite: AtWrite,
): Promise<ApplyResult> {
  if (spec.config_path === null) {
    throw new AgentRefusal(
      'InvalidAction',
      withFix(
        `the action names no config file`,
        'a service resource must name a file resource as its config; re-plan from the desired state',
      ),
    );
  }
  checkFileResourcePath(spec.config_path);
  const config = await locate(ctx.root, spec.config_path, 'config path');
  const cwd = await currentReleaseDir(ctx);
  const tag = launchTag(spec.command, cwd, config.abs);

  // An earlier attempt that spawned this very launch and died before recording it: adopt that
  // instance rather than start a second one.
  const adopted = await adoptInterrupted(ctx.root, resourceKey);
  if (adopted !== null && adopted.tag === tag)
    return await reportStarted(ctx, spec, adopted.state, {
      before: '',
      verb: 'adopted',
      after: ', started by an attempt the agent did not live to record',
    });

  // A restart is the ordinary path; stopping is only ever its first half, so both halves are one
  // step behind the agent's re-check: a refused restart never leaves the service stopped. An
  // observe of the node waits for that step (at most the stop's grace, then the spawn); the wait
  // for health comes after, outside it.
  const { stopped, state } = await atWrite(async () => {
    const before = await stopRecorded(ctx, resourceKey);
    const launched = await launch({
      root: ctx.root,
      key: resourceKey,
      command: spec.command,
      cwd,
      configPath: config.abs,
      tag,
      now,
      ...(ctx.services?.backend === 'systemd'
        ? { backend: { kind: 'systemd' as const, node: ctx.node, settings: ctx.services.systemd } }
        : {}),
    });
    return { stopped: before, state: launched };
  });
  return await reportStarted(ctx, spec, state, { before: stopped, verb: 'started', after: '' });
}

/** Stops the recorded instance, if it is running and provably ours; refuses a state file it cannot trust. */
async function stopRecorded(ctx: NodeContext, key: string): Promise<string> {
  const record = await readServiceRecord(ctx.root, key);
  if (record.kind === 'absent') return '';
  if (record.kind === 'invalid') throw unverified(key, record.file, `the file is not a state file Datum wrote (${record.why})`);
  const identity = await verifyIdentity(ctx.root, record.state);
  if (identity.kind === 'foreign') throw unverified(key, record.file, identity.why);
  if (identity.kind === 'gone') return '';
  return `${await stopInstance(ctx.root, record.state)}, then `;
}

async function reportStarted(
  ctx: NodeContext,
  spec: ServiceRunSpec,
  state: ServiceState,
  how: { before: string; verb: 'started' | 'adopted'; after: string },
): Promise<ApplyResult> {
  const release = path.relative(ctx.root, state.cwd);
  const started = `${how.before}${how.verb} ${describeInstance(state)} on port ${state.port}${how.after} (${spec.command.join(' ')} in ${release}, DATUM_CONFIG=${spec.config_path})`;
  if (state.start_ticks === null) {
    return { marker_after: null, detail: `${started}, but it exited at once (see ${state.log}).` };
  }
  const health = await waitHealthy(state, START_WAIT_MS);
  const value = reported(health);
  const said =
    value !== null && typeof value === 'object' && !Array.isArray(value)
      ? `health reported build ${JSON.stringify(value.build)}, config_sha256 ${short(value.config_sha256 as string | null)}`
      : `health did not answer usefully within ${START_WAIT_MS / 1000} s (${health.ok ? 'no {build, config_sha256}' : health.error})`;
  const expected = `expected build ${JSON.stringify(spec.build)}, config_sha256 ${short(spec.config_sha256 as string | null)}`;
  return { marker_after: serviceMarker(state.pid, state.start_ticks), detail: `${started}; ${said} (${expected}).` };
}
