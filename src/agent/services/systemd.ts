import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import { withFix } from '../../contract';
import { InvalidAgentConfig } from '../../domain';
import { AgentRefusal, SERVICE_START_FAILED } from '../refusal';
import type { AgentConfig } from '../../schemas';

/*
 * The systemd backend of managed services (agent.yaml `services: { backend: systemd }`): each
 * service runs as a transient unit made by `systemd-run`, and is inspected and stopped with
 * `systemctl`. The state file, the nonce, the port, the log and the health probe are the process
 * backend's (state.ts, launch.ts, log.ts, health.ts); only who starts, watches and stops the
 * process differs.
 *
 * A transient *service*, not a scope. `systemd-run --scope` runs the command itself, as its own
 * child: the service would be the agent's child, inherit the agent's execution environment (the
 * mount namespace of ProtectSystem=strict, ReadWritePaths limited to the node root,
 * NoNewPrivileges, the agent's user and environment) and share its fate on a crash. A transient
 * service is forked by the service manager in a clean environment whose directory, environment,
 * user, log and limits are the properties given here; it survives the agent's restart or crash
 * by construction (the agent's KillMode=process is then irrelevant); and systemd tracks it by
 * cgroup, so `systemctl stop` reaches every process of it and cannot hit a reused pid.
 *
 * Restart= is deliberately not set (and refused in agent.yaml): the loop restarts a service, so
 * every restart is a decision with a record, and a main pid that changed under us means someone
 * else started it again.
 */

export type SystemdManager = 'system' | 'user';
export type SystemdSettings = AgentConfig['services']['systemd'];

/** systemd-run learned --expand-environment=no in 254; before it, a literal $ is written $$. */
export const EXPAND_ENVIRONMENT_OPTION_SINCE = 254;
/** Matches the process backend's grace between SIGTERM and SIGKILL (stopInstance). */
export const STOP_TIMEOUT_SEC = 5;
const UNIT_NAME_MAX = 255;

/**
 * One unit-name component as `systemd-escape` writes it: every byte outside [A-Za-z0-9:_.] (and
 * a leading ".") becomes \xNN, "-" included, so the "-" between node and service in a unit name
 * is unambiguous: node "a-b" with service "c" and node "a" with service "b-c" get different
 * units. One difference: systemd-escape turns "/" into "-" (it is made for paths), which would
 * make "a/b" and "a-b" one unit; here "/" is \x2f like any other byte.
 */
export function systemdEscape(text: string): string {
  let out = '';
  const bytes = Buffer.from(text, 'utf8');
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    const c = String.fromCharCode(b);
    if (/[A-Za-z0-9:_]/.test(c) || (c === '.' && i > 0)) out += c;
    else out += `\\x${b.toString(16).padStart(2, '0')}`;
  }
  return out;
}

/**
 * The unit of service `key` on node `node`: datum-<node>-<key>.service, both escaped. Past
 * systemd's 255 characters (only names full of escaped characters get there) it is
 * datum-<hash of both>.service instead, still one unit per (node, key).
 */
export function unitName(node: string, key: string): string {
  const plain = `datum-${systemdEscape(node)}-${systemdEscape(key)}.service`;
  if (plain.length <= UNIT_NAME_MAX) return plain;
  const hash = createHash('sha256').update(`${node}\0${key}`).digest('hex').slice(0, 32);
  return `datum-${hash}.service`;
}

const managerFlag = (manager: SystemdManager): string[] => (manager === 'user' ? ['--user'] : []);

export interface UnitRequest {
  unit: string;
  manager: SystemdManager;
  /** systemd's version (systemdVersion), which decides how a literal $ is kept. */
  version: number;
  description: string;
  /** The release directory the command runs in. */
  cwd: string;
  command: string[];
  env: Record<string, string>;
  /** Absolute path of the log both output streams append to. */
  log: string;
  /** Run as this user (system manager only); undefined: the manager's default. */
  user?: string;
  properties: Record<string, string | number | boolean>;
}

/**
 * The exact argv of the systemd-run that starts a service (no shell: every element is one
 * argument). The service manager expands $VAR in command arguments (never in --setenv values,
 * and specifiers such as %n are not expanded in transient units), so a literal $ in the command
 * survives through --expand-environment=no, or as $$ before systemd 254. The first word is
 * exempt: systemd-run resolves it to the program's path itself and the manager never expands it.
 */
export function systemdRunArgv(req: UnitRequest): string[] {
  const keepDollars = req.version >= EXPAND_ENVIRONMENT_OPTION_SINCE;
  const argv = [
    ...managerFlag(req.manager),
    `--unit=${req.unit}`,
    `--description=${req.description}`,
    // exec: systemd-run succeeds only once the command really started (simple would report a
    // missing program as a started service that then fails).
    '--service-type=exec',
    '--collect',
    '--quiet',
    '--no-ask-password',
    ...(keepDollars ? ['--expand-environment=no'] : []),
    `--working-directory=${req.cwd}`,
    ...(req.user !== undefined ? [`--uid=${req.user}`] : []),
    ...Object.keys(req.env)
      .sort()
      .map((name) => `--setenv=${name}=${req.env[name]}`),
    `--property=StandardOutput=append:${req.log}`,
    `--property=StandardError=append:${req.log}`,
    `--property=TimeoutStopSec=${STOP_TIMEOUT_SEC}`,
    // The operator's after Datum's defaults: a later assignment wins (TimeoutStopSec, say).
    ...Object.keys(req.properties)
      .sort()
      .map((name) => `--property=${name}=${String(req.properties[name])}`),
    '--',
    req.command[0],
    ...req.command.slice(1).map((word) => (keepDollars ? word : word.replaceAll('$', () => '$$'))),
  ];
  return argv;
}

/** What `systemctl show` is asked about a unit. */
export const SHOW_PROPERTIES = ['LoadState', 'ActiveState', 'SubState', 'MainPID', 'InvocationID', 'Environment'] as const;

export const systemctlShowArgv = (manager: SystemdManager, unit: string): string[] => [
  ...managerFlag(manager),
  'show',
  `--property=${SHOW_PROPERTIES.join(',')}`,
  '--',
  unit,
];

export const systemctlStopArgv = (manager: SystemdManager, unit: string): string[] => [
  ...managerFlag(manager),
  'stop',
  '--no-ask-password',
  '--',
  unit,
];

/** `systemctl show`'s Key=Value lines as a record (a value may itself contain "="). */
export function parseShow(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) out[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return out;
}

/** The version number of `systemd-run --version`'s first line ("systemd 252 (252.39-1~deb12u2)"). */
export function parseSystemdVersion(text: string): number | null {
  const m = /^systemd (\d+)\b/.exec(text.trim());
  return m ? Number(m[1]) : null;
}

/** What an instance Datum recorded as started in a unit is checked against. */
export interface UnitRecord {
  unit: string;
  pid: number;
  invocation_id: string;
  /** NAME=VALUE of the nonce the agent gave the instance. */
  nonce: string;
}

export type UnitIdentity = { kind: 'ours' } | { kind: 'gone' } | { kind: 'foreign'; why: string };

/**
 * Whether the unit, as `systemctl show` describes it now, still runs the instance Datum started:
 * loaded and not stopped, the same invocation (a restart by anyone makes a new one), the same
 * main pid, and the nonce in the environment the manager holds for it.
 */
export function judgeUnit(show: Record<string, string>, rec: UnitRecord): UnitIdentity {
  const live = ['active', 'activating', 'reloading', 'deactivating'];
  if (show.LoadState !== 'loaded' || !live.includes(show.ActiveState ?? '') || Number(show.MainPID ?? 0) <= 0)
    return { kind: 'gone' };
  if (!environmentHas(show.Environment ?? '', rec.nonce))
    return { kind: 'foreign', why: `${rec.unit} does not carry the nonce the agent gave the instance it started` };
  if (show.InvocationID !== rec.invocation_id)
    return {
      kind: 'foreign',
      why: `${rec.unit} was started again outside Datum (invocation ${show.InvocationID}, not the recorded ${rec.invocation_id})`,
    };
  if (Number(show.MainPID) !== rec.pid)
    return { kind: 'foreign', why: `${rec.unit} runs main pid ${show.MainPID}, not the recorded ${rec.pid}` };
  return { kind: 'ours' };
}

/** Whether `systemctl show`'s Environment= line holds the assignment (quoted when it has spaces). */
function environmentHas(line: string, assignment: string): boolean {
  return line.split(/\s+/).some((word) => word.replace(/^"|"$/g, '') === assignment);
}

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Set when the program could not be run at all (ENOENT: not installed). */
  error?: string;
}

export function run(program: string, argv: string[], options: { cwd?: string; timeoutMs: number }): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(program, argv, { cwd: options.cwd, timeout: options.timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      const e = err as (NodeJS.ErrnoException & { code?: string | number }) | null;
      if (e && typeof e.code === 'string') resolve({ code: null, stdout, stderr, error: `${e.code}: ${e.message}` });
      else resolve({ code: e ? (typeof e.code === 'number' ? e.code : 1) : 0, stdout, stderr });
    });
  });
}

export const oneLine = (text: string) => text.trim().split('\n').filter(Boolean).join('; ');

/** The version of the systemd-run on PATH, or the reason there is none. */
export async function systemdVersion(): Promise<{ version: number } | { problem: string }> {
  const ran = await run('systemd-run', ['--version'], { timeoutMs: 10_000 });
  if (ran.error !== undefined) return { problem: `systemd-run cannot be run (${ran.error})` };
  const version = parseSystemdVersion(ran.stdout);
  if (ran.code !== 0 || version === null)
    return { problem: `systemd-run --version answered ${JSON.stringify(oneLine(ran.stdout + ran.stderr))}` };
  return { version };
}

/** The command name of PID 1, for saying what runs instead of systemd. */
async function initName(): Promise<string> {
  return (await fs.readFile('/proc/1/comm', 'utf8').catch(() => 'unknown\n')).trim();
}

/**
 * Whether services can be run through `manager` here: systemd-run installed, the host booted
 * with systemd (the system manager; sd_booted's test, /run/systemd/system), and the manager
 * answering. Creating units may still be denied (polkit): that is reported when it happens.
 */
export async function systemdUsable(
  manager: SystemdManager,
): Promise<{ ok: true; version: number } | { ok: false; problem: string; fix: string }> {
  // Not booted with systemd first: on such a host that is the fact to fix, installed or not.
  if (manager === 'system') {
    const booted = await fs.stat('/run/systemd/system').then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (!booted)
      return {
        ok: false,
        problem: `systemd is not running on this host (PID 1 is ${await initName()})`,
        fix: 'set services.backend: process in agent.yaml, or run the agent on a host booted with systemd',
      };
  }
  const installed = await systemdVersion();
  if ('problem' in installed)
    return {
      ok: false,
      problem: installed.problem,
      fix: 'install systemd (the systemd-run and systemctl commands), or set services.backend: process',
    };
  const ran = await run('systemctl', [...managerFlag(manager), 'show', '--property=Version'], { timeoutMs: 10_000 });
  if (ran.code !== 0 || !ran.stdout.startsWith('Version='))
    return {
      ok: false,
      problem: `systemd's ${manager} manager does not answer (systemctl${manager === 'user' ? ' --user' : ''} show: ${oneLine(ran.error ?? ran.stderr) || `exit ${ran.code}`})`,
      fix:
        manager === 'user'
          ? 'run the agent where its user has a manager (loginctl enable-linger <user>, XDG_RUNTIME_DIR set), use manager: system, or set services.backend: process'
          : 'check that systemd and D-Bus are running, or set services.backend: process',
    };
  return { ok: true, version: installed.version };
}

/**
 * At the agent's start: an agent.yaml that chose the systemd backend on a host where it cannot
 * work is refused, naming the file, the field, what is wrong and the fix, before anything runs.
 */
export async function checkServiceBackend(file: string, config: AgentConfig): Promise<void> {
  if (config.services.backend !== 'systemd') return;
  const usable = await systemdUsable(config.services.systemd.manager);
  if (usable.ok) return;
  throw new InvalidAgentConfig(file, [
    { field: 'services.backend', problem: `is systemd, but ${usable.problem}`, fix: usable.fix },
  ]);
}

/** The user a system-manager unit runs as: the configured one, else the agent's own (as the process backend does). */
export function unitUser(settings: SystemdSettings, agentUid = os.userInfo().uid): string | undefined {
  if (settings.manager === 'user') return undefined;
  if (settings.user !== undefined) return settings.user;
  return agentUid === 0 ? undefined : String(agentUid);
}

/** Why systemd-run refused, with the fix a person can act on. */
function startFailure(unit: string, command: string[], cwd: string, ran: Ran): AgentRefusal {
  const said = oneLine(ran.error ?? ran.stderr) || `exit ${ran.code}`;
  const denied = /authenticat|access denied|not authorized|permission/i.test(said);
  return new AgentRefusal(
    SERVICE_START_FAILED,
    withFix(
      `systemd-run could not start ${JSON.stringify(command)} in ${cwd} as ${unit}: ${said}`,
      denied
        ? "allow the agent's user to manage units (a polkit rule for org.freedesktop.systemd1.manage-units), or run the agent as root"
        : 'check the command of the service resource and that the release contains it',
    ),
    { unit },
  );
}

/** What `systemctl show` says about a unit now; throws when systemctl itself fails. */
export async function showUnit(manager: SystemdManager, unit: string): Promise<Record<string, string>> {
  const ran = await run('systemctl', systemctlShowArgv(manager, unit), { timeoutMs: 30_000 });
  if (ran.code !== 0) throw new Error(`systemctl show ${unit} failed: ${oneLine(ran.error ?? ran.stderr) || `exit ${ran.code}`}`);
  return parseShow(ran.stdout);
}

/**
 * Starts the unit and reads back its main pid and invocation. A unit of the same name that is
 * already loaded is no unit Datum recorded (the caller stopped its own, or adopted it): it is
 * reported, never stopped. `exited` when the command was gone before its pid could be read.
 */
export async function startUnit(
  req: UnitRequest,
): Promise<{ kind: 'running'; pid: number; invocation_id: string } | { kind: 'exited' }> {
  const before = await showUnit(req.manager, req.unit);
  if (before.LoadState === 'loaded' && before.ActiveState !== 'inactive' && before.ActiveState !== 'failed') {
    throw new AgentRefusal(
      'ServiceIdentityUnverified',
      withFix(
        `${req.unit} is already loaded (${before.ActiveState}, main pid ${before.MainPID}) and Datum has no record of starting it; nothing was signalled`,
        `check it (systemctl${req.manager === 'user' ? ' --user' : ''} status ${req.unit}) and stop it by hand; the next start runs Datum's own`,
      ),
      { unit: req.unit },
    );
  }
  if (before.LoadState === 'loaded')
    await run('systemctl', [...managerFlag(req.manager), 'reset-failed', '--', req.unit], { timeoutMs: 30_000 });
  const ran = await run('systemd-run', systemdRunArgv(req), { cwd: req.cwd, timeoutMs: 60_000 });
  if (ran.code !== 0) throw startFailure(req.unit, req.command, req.cwd, ran);
  const after = await showUnit(req.manager, req.unit);
  const pid = Number(after.MainPID ?? 0);
  if (after.LoadState !== 'loaded' || pid <= 0 || !after.InvocationID) return { kind: 'exited' };
  return { kind: 'running', pid, invocation_id: after.InvocationID };
}

/** `systemctl stop`: SIGTERM to every process of the unit, SIGKILL after TimeoutStopSec. */
export async function stopUnit(manager: SystemdManager, unit: string): Promise<void> {
  const ran = await run('systemctl', systemctlStopArgv(manager, unit), { timeoutMs: 10 * 60_000 });
  // 5: the unit is not loaded any more (it exited, and --collect unloaded it): stopped either way.
  if (ran.code !== 0 && ran.code !== 5)
    throw new Error(`systemctl stop ${unit} failed: ${oneLine(ran.error ?? ran.stderr) || `exit ${ran.code}`}`);
}
