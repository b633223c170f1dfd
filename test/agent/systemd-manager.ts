// A systemd service manager for the systemd backend's tests: the user manager of this session
// when there is one, else a private `systemd --user` this helper starts. systemd refuses to run
// as a user manager unless the host was booted with it (it checks /run/systemd/system), so on a
// host whose PID 1 is something else the private manager runs in a mount namespace of its own
// (unshare, which needs root) with an empty /run holding that directory. Nothing outside the
// namespace changes; the manager's control socket is in a temp dir both sides see
// (XDG_RUNTIME_DIR), so systemctl --user and systemd-run --user reach it from the test.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface TestManager {
  manager: 'user';
  /** How the manager was found, for the test's messages. */
  how: string;
  /** Stops a manager this helper started (and with it every unit it runs); leaves a session's own alone. */
  stop(): Promise<void>;
}

const answers = (env: NodeJS.ProcessEnv) =>
  spawnSync('systemctl', ['--user', 'show', '--property=Version'], { env, encoding: 'utf8', timeout: 10_000 });

/** A reachable user manager, or why there is none (the skip reason). */
export async function userManager(): Promise<TestManager | { skip: string }> {
  if (spawnSync('systemd-run', ['--version']).status !== 0) return { skip: 'systemd is not installed (no systemd-run)' };
  const own = answers(process.env);
  if (own.status === 0) return { manager: 'user', how: "this session's user manager", stop: () => Promise.resolve() };
  if (process.getuid?.() !== 0 || spawnSync('unshare', ['--version']).status !== 0)
    return {
      skip: `no user manager answers (systemctl --user: ${own.stderr.trim()}) and a private one needs root and unshare`,
    };

  const runtime = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-systemd-'));
  await fs.chmod(runtime, 0o700);
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_RUNTIME_DIR: runtime };
  delete env.DBUS_SESSION_BUS_ADDRESS;
  const child: ChildProcess = spawn(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      'mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && exec systemd --user',
    ],
    { env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = once(child, 'exit');
  for (let i = 0; i < 100 && child.exitCode === null; i++) {
    if (answers(env).status === 0) {
      const saved = {
        XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR,
        DBUS_SESSION_BUS_ADDRESS: process.env.DBUS_SESSION_BUS_ADDRESS,
      };
      process.env.XDG_RUNTIME_DIR = runtime;
      delete process.env.DBUS_SESSION_BUS_ADDRESS;
      return {
        manager: 'user',
        how: `a private systemd --user (pid ${child.pid}) in its own mount namespace`,
        stop: async () => {
          spawnSync('systemctl', ['--user', 'exit'], { env, timeout: 10_000 });
          const done = await Promise.race([exited.then(() => true), sleep(15_000).then(() => false)]);
          if (!done) child.kill('SIGKILL');
          for (const [name, value] of Object.entries(saved))
            if (value === undefined) delete process.env[name];
            else process.env[name] = value;
          await fs.rm(runtime, { recursive: true, force: true });
        },
      };
    }
    await sleep(100);
  }
  if (child.exitCode === null) child.kill('SIGKILL');
  await exited;
  await fs.rm(runtime, { recursive: true, force: true });
  return { skip: `a private systemd --user did not come up (${stderr.trim() || `exit ${child.exitCode}`})` };
}
