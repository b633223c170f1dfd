// A systemd service manager for the tests of the systemd backend and of `unit` resources: the
// user manager of this session when there is one, else a private `systemd --user` this helper
// starts. systemd refuses to run as a user manager unless the host was booted with it (it checks
// /run/systemd/system), so on a host whose PID 1 is something else the private manager runs in a
// mount namespace of its own (unshare, which needs root) with an empty /run holding that
// directory. Its control socket is in a temp dir both sides see (XDG_RUNTIME_DIR), so
// systemctl --user and systemd-run --user reach it from the test.
//
// A private manager must not reach the rest of the machine, and two things would let it:
//  - at start, systemd moves every process left in the root of its cgroup tree into init.scope
//    (src/core/cgroup.c manager_setup_cgroup). Started in the machine's root cgroup, that is every
//    userspace process of the machine. So the launcher first moves itself into a cgroup of its own
//    (/sys/fs/cgroup/<hierarchy>/datum-test-<pid>-<n>); the manager's tree is then that cgroup,
//    and what it moves is only itself. stop() removes that subtree again.
//  - `systemctl --user enable` writes into $XDG_CONFIG_HOME/systemd/user, which defaults to
//    /root/.config. So the manager and every systemctl of the test (through process.env, set
//    while the manager runs) share temp config and data homes.
// Without root, a writable cgroup tree or unshare there is no private manager: the tests skip,
// saying why, rather than start one that would reach further (and in CI that skip fails the run,
// test/skip-policy.ts). systemd itself is installed where it is missing (test/helpers/tools.ts).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, promises as fs, readFileSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { toolOrReason } from '../helpers/tools';

export interface TestManager {
  manager: 'user';
  /** How the manager was found, for the test's messages. */
  how: string;
  /**
   * The XDG directories a private manager and every systemctl of the test share (set in
   * process.env while it runs); null for a session's own manager, whose homes are the user's.
   */
  dirs: { runtime: string; config: string; data: string } | null;
  /** Stops a manager this helper started (and with it every unit it runs); leaves a session's own alone. */
  stop(): Promise<void>;
}

const answers = (env: NodeJS.ProcessEnv) =>
  spawnSync('systemctl', ['--user', 'show', '--property=Version'], { env, encoding: 'utf8', timeout: 10_000 });

const CGROUP = '/sys/fs/cgroup';
/** The cgroup v1 hierarchies a user manager moves processes in (cpuset is left out: a new cpuset cgroup takes no process until its cpus and mems are set). */
const V1_HIERARCHIES = ['systemd', 'unified', 'pids', 'memory', 'cpu', 'cpuacct', 'devices', 'freezer', 'blkio'];

/** The cgroup directories a private manager's launcher joins, one per hierarchy: one directory on a pure cgroup2 host. */
function cgroupParents(): string[] {
  if (existsSync(path.join(CGROUP, 'cgroup.controllers'))) return [CGROUP];
  const seen = new Set<string>();
  for (const name of V1_HIERARCHIES) {
    const dir = path.join(CGROUP, name);
    // cpu -> cpu,cpuacct: one hierarchy under two names.
    if (existsSync(dir)) seen.add(realpathSync(dir));
  }
  return [...seen];
}

let made = 0;

/** Creates the private manager's own cgroup in each hierarchy; null with the reason when it cannot. */
async function ownCgroups(): Promise<{ dirs: string[] } | { skip: string }> {
  const name = `datum-test-${process.pid}-${++made}`;
  const dirs: string[] = [];
  try {
    for (const parent of cgroupParents()) {
      const dir = path.join(parent, name);
      await fs.mkdir(dir);
      dirs.push(dir);
    }
  } catch (err) {
    await removeCgroups(dirs);
    return { skip: `a private systemd --user needs a cgroup of its own, and ${CGROUP} refused one (${(err as Error).message})` };
  }
  return dirs.length > 0 ? { dirs } : { skip: `no cgroup hierarchy under ${CGROUP}` };
}

/**
 * Removes the manager's cgroup subtrees, deepest first. A process still in one is one the
 * manager started (a unit it ran): it is killed, and the directory removed once it is gone.
 */
async function removeCgroups(dirs: string[]): Promise<string[]> {
  const left: string[] = [];
  for (const top of dirs) {
    for (const dir of (await subtree(top)).reverse()) {
      for (let i = 0; ; i++) {
        const procs = (await fs.readFile(path.join(dir, 'cgroup.procs'), 'utf8').catch(() => ''))
          .split('\n')
          .filter(Boolean)
          .map(Number);
        for (const pid of procs) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // gone already
          }
        }
        try {
          await fs.rmdir(dir);
          break;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') break;
          if (i >= 50) {
            left.push(`${dir} (${(err as Error).message})`);
            break;
          }
          await sleep(100);
        }
      }
    }
  }
  return left;
}

async function subtree(dir: string): Promise<string[]> {
  const out = [dir];
  const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) if (e.isDirectory()) out.push(...(await subtree(path.join(dir, e.name))));
  return out;
}

/** The cgroup lines of /proc/<pid>/cgroup, sorted: what the private manager must leave as they were. */
export function cgroupsOf(pid: number | 'self'): string {
  return readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n').sort().join('\n');
}

/** A reachable user manager, or why there is none (the skip reason). `privateOnly` never uses the session's own. */
export async function userManager(options: { privateOnly?: boolean } = {}): Promise<TestManager | { skip: string }> {
  // Installed where missing (Debian's systemd package brings all three); in CI a machine that cannot fails.
  for (const tool of ['systemd', 'systemctl', 'systemd-run'] as const) {
    const found = await toolOrReason(tool);
    if ('skip' in found) return found;
  }
  const own = answers(process.env);
  if (own.status === 0 && !options.privateOnly)
    return { manager: 'user', how: "this session's user manager", dirs: null, stop: () => Promise.resolve() };
  if (process.getuid?.() !== 0 || spawnSync('unshare', ['--version']).status !== 0)
    return { skip: `no private systemd --user: it needs root and unshare (systemctl --user: ${own.stderr.trim()})` };
  return await privateManager();
}

async function privateManager(): Promise<TestManager | { skip: string }> {
  const cgroups = await ownCgroups();
  if ('skip' in cgroups) return cgroups;
  const base = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-systemd-'));
  const dirs = { runtime: path.join(base, 'run'), config: path.join(base, 'config'), data: path.join(base, 'data') };
  for (const dir of Object.values(dirs)) await fs.mkdir(dir, { mode: 0o700 });
  const xdg = { XDG_RUNTIME_DIR: dirs.runtime, XDG_CONFIG_HOME: dirs.config, XDG_DATA_HOME: dirs.data };
  const env: NodeJS.ProcessEnv = { ...process.env, ...xdg };
  delete env.DBUS_SESSION_BUS_ADDRESS;
  // The launcher joins its own cgroups before it execs systemd (and exits if it cannot), so the
  // manager's tree never holds another process of the machine.
  const launch =
    'for d in "$@"; do echo $$ > "$d/cgroup.procs" || exit 97; done; ' +
    'mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && exec systemd --user';
  const child: ChildProcess = spawn(
    'unshare',
    ['--mount', '--propagation', 'private', 'sh', '-c', launch, 'sh', ...cgroups.dirs],
    { env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = once(child, 'exit');
  const cleanup = async () => {
    const left = await removeCgroups(cgroups.dirs);
    await fs.rm(base, { recursive: true, force: true });
    if (left.length > 0) throw new Error(`the private manager's cgroups could not be removed: ${left.join(', ')}`);
  };
  for (let i = 0; i < 100 && child.exitCode === null; i++) {
    if (answers(env).status === 0) {
      const saved = Object.fromEntries(
        [...Object.keys(xdg), 'DBUS_SESSION_BUS_ADDRESS'].map((name) => [name, process.env[name]] as const),
      );
      Object.assign(process.env, xdg);
      delete process.env.DBUS_SESSION_BUS_ADDRESS;
      return {
        manager: 'user',
        how: `a private systemd --user (pid ${child.pid}) in its own mount namespace and cgroup`,
        dirs,
        stop: async () => {
          spawnSync('systemctl', ['--user', 'exit'], { env, timeout: 10_000 });
          const done = await Promise.race([exited.then(() => true), sleep(15_000).then(() => false)]);
          if (!done) child.kill('SIGKILL');
          for (const [name, value] of Object.entries(saved))
            if (value === undefined) delete process.env[name];
            else process.env[name] = value;
          await cleanup();
        },
      };
    }
    await sleep(100);
  }
  if (child.exitCode === null) child.kill('SIGKILL');
  await exited;
  await cleanup();
  return { skip: `a private systemd --user did not come up (${stderr.trim() || `exit ${child.exitCode}`})` };
}
