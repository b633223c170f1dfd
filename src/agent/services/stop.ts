import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inDatumDir, readdirOrEmpty, isErrno, locateIn, realRoot } from '../fs';
import { AgentRefusal } from '../refusal';
import { adoptInterrupted } from './adopt';
import { isRunning, unverified, verifyIdentity } from './identity';
import { describeInstance, readServiceState, stateRel, type ServiceState } from './state';
import { stopUnit } from './systemd';

/** Signals the process group of a verified instance (its pid is the group's id). */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch (err) {
    if (!isErrno(err, 'ESRCH')) throw err;
  }
}

// The waits below need not heartbeat: the apply that runs them beats from a timer (heartbeat.ts).
async function waitUntil(done: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await done()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
}

/**
 * Stops one recorded instance: SIGTERM to its process group, up to `graceMs` to exit, then
 * SIGKILL. Only ever called on the way to starting the service again (a restart), or by an
 * operator's explicit clean-up: killing without restart is destructive and never a repair.
 */
export async function stopInstance(root: string, state: ServiceState, graceMs = 5000): Promise<string> {
  if (state.systemd !== undefined) return await stopUnitInstance(root, state, state.systemd);
  // Identity is proved again right before each signal: between two checks the pid may exit and
  // be reused, and a signal to a stranger cannot be taken back.
  const prove = async (): Promise<boolean> => {
    const identity = await verifyIdentity(root, state);
    if (identity.kind === 'foreign') throw unverified(state.key, stateRel(state.key), identity.why);
    return identity.kind === 'ours';
  };
  if (!(await prove())) return `pid ${state.pid} was no longer running`;
  const gone = async () => !(await isRunning(state));
  signalGroup(state.pid, 'SIGTERM');
  if (await waitUntil(gone, graceMs)) return `stopped pid ${state.pid} with SIGTERM`;
  if (!(await prove())) return `stopped pid ${state.pid} with SIGTERM`;
  signalGroup(state.pid, 'SIGKILL');
  if (await waitUntil(gone, 2000)) return `killed pid ${state.pid} with SIGKILL after it ignored SIGTERM for ${graceMs / 1000} s`;
  throw new Error(`pid ${state.pid} of service ${state.key} survived SIGTERM and SIGKILL`);
}

/**
 * The systemd backend's stop: `systemctl stop` (SIGTERM to every process of the unit, SIGKILL
 * after TimeoutStopSec), only once systemd confirms the unit still runs the recorded instance.
 */
async function stopUnitInstance(root: string, state: ServiceState, unit: NonNullable<ServiceState['systemd']>): Promise<string> {
  const identity = await verifyIdentity(root, state);
  if (identity.kind === 'foreign') throw unverified(state.key, stateRel(state.key), identity.why);
  if (identity.kind === 'gone') return `${describeInstance(state)} was no longer running`;
  await stopUnit(unit.manager, unit.unit);
  if (!(await waitUntil(async () => !(await isRunning(state)), 2000)))
    throw new Error(`pid ${state.pid} of service ${state.key} survived systemctl stop ${unit.unit}`);
  return `stopped ${describeInstance(state)} with systemctl stop`;
}

/**
 * Stops every service the agent started under `root` and forgets them (the state files go; the
 * logs stay). For tests and for an operator's clean-up, never for a repair.
 */
export async function stopServices(root: string): Promise<Array<{ key: string; pid: number; result: string }>> {
  const real = await realRoot(root, false);
  const dir = path.dirname((await locateIn(real, stateRel('_'), 'service state path', '.datum')).abs);
  const names = await readdirOrEmpty(dir);
  const stopped: Array<{ key: string; pid: number; result: string }> = [];
  for (const name of names.filter((n) => n.endsWith('.json') && !n.endsWith('.intent.json')).sort()) {
    const key = name.slice(0, -'.json'.length);
    await adoptInterrupted(real, key);
    const state = await readServiceState(real, key);
    if (state === null) continue;
    const result = await stopInstance(real, state).catch((err: Error) => {
      if (err instanceof AgentRefusal && err.type === 'ServiceIdentityUnverified') return `not signalled: ${err.message}`;
      throw err;
    });
    stopped.push({ key, pid: state.pid, result });
    await inDatumDir(real, 'services', false, (held) => held.remove(name), undefined);
  }
  return stopped;
}
