import { promises as fs } from 'node:fs';
import path from 'node:path';
import { withFix } from '../../contract';
import { isErrno, isInside } from '../fs';
import { AgentRefusal } from '../refusal';
import { NONCE_ENV, type ServiceState } from './state';
import { judgeUnit, showUnit } from './systemd';

/*
 * Whether a recorded instance is still the one Datum started, judged from /proc (or, for a
 * systemd unit, from systemd). A process is "ours" only while /proc/<pid>/stat still shows the
 * start time we recorded: after a reboot or pid reuse the pid may name a stranger, which the
 * agent must neither report as the service nor signal.
 *
 * The state file is not proof either: anyone who can write it can name any pid. So before any
 * signal (and before reporting a process as the service) `verifyIdentity` checks, from /proc,
 * everything the agent recorded at spawn: the start time, the command line, a working directory
 * under this root's releases, its own process group (Datum starts every service as a group
 * leader), and the nonce the agent put in its environment (DATUM_SERVICE_NONCE). pid ≤ 1 is
 * never a service. A process that fails any check is reported and never signalled.
 */

/**
 * Field 22 of /proc/<pid>/stat: the process's start time in clock ticks since boot. Null when
 * there is no such process or it has already exited (a zombie is not running anything).
 */
export async function startTicks(pid: number): Promise<string | null> {
  return (await procStat(pid))?.ticks ?? null;
}

/** Fields 5 (process group) and 22 (start time) of /proc/<pid>/stat; null when gone or a zombie. */
export async function procStat(pid: number): Promise<{ pgrp: number; ticks: string } | null> {
  if (!Number.isSafeInteger(pid) || pid <= 0) return null;
  let text: string;
  try {
    text = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
  } catch (err) {
    if (isErrno(err, 'ENOENT') || isErrno(err, 'ESRCH')) return null;
    throw err;
  }
  // Field 2 (comm) is parenthesised and may itself contain spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  if (state === 'Z' || state === 'X' || state === 'x') return null;
  const ticks = fields[22 - 3];
  return ticks === undefined ? null : { pgrp: Number(fields[5 - 3]), ticks };
}

/** True while the recorded process is alive with the recorded start time (see verifyIdentity for proof). */
export async function isRunning(state: ServiceState): Promise<boolean> {
  return state.start_ticks !== null && (await startTicks(state.pid)) === state.start_ticks;
}

/** ours: provably the instance Datum started; gone: not running (any more); foreign: a live stranger. */
export type Identity = { kind: 'ours' } | { kind: 'gone' } | { kind: 'foreign'; why: string };

/** A /proc/<pid>/<file> as text, or the reason it cannot be read. */
export async function procText(pid: number, file: 'cmdline' | 'environ'): Promise<string | { unreadable: string }> {
  try {
    return await fs.readFile(`/proc/${pid}/${file}`, 'utf8');
  } catch (err) {
    return { unreadable: (err as NodeJS.ErrnoException).code ?? (err as Error).message };
  }
}

/**
 * Whether the process a state file names is the instance Datum started under `root` (a real
 * path), judged from /proc only. A different start time means the pid was reused: the service
 * is gone, an ordinary state after a crash or a reboot. Anything else that does not match is a
 * forgery or a stranger, and is never signalled.
 */
export async function verifyIdentity(root: string, state: ServiceState): Promise<Identity> {
  const foreign = (why: string): Identity => ({ kind: 'foreign', why: `pid ${state.pid} ${why}` });
  if (state.pid <= 1) return foreign('is the init process, never a service Datum started');
  if (state.systemd !== undefined) return await verifyUnit(state, state.systemd);
  const stat = await procStat(state.pid);
  if (stat === null || state.start_ticks === null || stat.ticks !== state.start_ticks) return { kind: 'gone' };
  if (stat.pgrp !== state.pid)
    return foreign(`is in process group ${stat.pgrp}, not its own; Datum starts every service as the leader of its own group`);
  const cmdline = await procText(state.pid, 'cmdline');
  if (typeof cmdline !== 'string') return foreign(`cannot be inspected (/proc/${state.pid}/cmdline: ${cmdline.unreadable})`);
  const argv = cmdline.split('\0').slice(0, -1);
  if (!runsCommand(argv, state.command))
    return foreign(`runs ${JSON.stringify(argv)}, not the recorded ${JSON.stringify(state.command)}`);
  const cwd = await fs.readlink(`/proc/${state.pid}/cwd`).catch((err: NodeJS.ErrnoException) => `(unreadable: ${err.code})`);
  if (!isInside(path.join(root, 'releases'), cwd)) return foreign(`works in ${cwd}, not in a release of this node`);
  if (state.nonce === undefined) return { kind: 'ours' }; // a state file from before nonces: the checks above
  const environ = await procText(state.pid, 'environ');
  if (typeof environ !== 'string') return foreign(`cannot be inspected (/proc/${state.pid}/environ: ${environ.unreadable})`);
  if (!environ.split('\0').includes(`${NONCE_ENV}=${state.nonce}`))
    return foreign(`does not carry the nonce the agent gave the instance it started (${NONCE_ENV})`);
  return { kind: 'ours' };
}

/**
 * The systemd backend's identity: systemd's own account of the unit (loaded, the recorded
 * invocation and main pid, the nonce in its environment), and the start time /proc shows for
 * that pid (so the marker and the watch agree with it). The cgroup, not /proc, is the proof here.
 */
async function verifyUnit(state: ServiceState, unit: NonNullable<ServiceState['systemd']>): Promise<Identity> {
  let show: Record<string, string>;
  try {
    show = await showUnit(unit.manager, unit.unit);
  } catch (err) {
    return { kind: 'foreign', why: `unit ${unit.unit} cannot be inspected (${(err as Error).message})` };
  }
  const judged = judgeUnit(show, {
    unit: unit.unit,
    pid: state.pid,
    invocation_id: unit.invocation_id,
    nonce: `${NONCE_ENV}=${state.nonce ?? ''}`,
  });
  if (judged.kind !== 'ours') return judged;
  return (await isRunning(state)) ? judged : { kind: 'gone' };
}

/**
 * Whether a process's argv is the recorded command: the same words, or the same words after
 * the interpreter the kernel put in front of a script with a "#!" line (["/bin/sh", "./run.sh"]
 * for the command ["./run.sh"]). A service that rewrites its own argv cannot be verified, and is
 * reported as such rather than guessed at.
 */
function runsCommand(argv: string[], command: string[]): boolean {
  if (argv.length < command.length || argv.length > command.length + 2) return false;
  return JSON.stringify(argv.slice(argv.length - command.length)) === JSON.stringify(command);
}

/** The refusal for a state file naming a process Datum cannot prove it started. */
export function unverified(key: string, file: string, why: string): AgentRefusal {
  return new AgentRefusal(
    'ServiceIdentityUnverified',
    withFix(
      `the state file ${file} of service "${key}" names a process Datum cannot prove it started: ${why}; nothing was signalled`,
      `check that process by hand, then remove ${file}; the next start records the instance it starts`,
    ),
    { service: key, state_file: file },
  );
}
