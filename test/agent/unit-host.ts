// A host for `unit` resources in tests: a private systemd --user (test/agent/systemd-manager.ts),
// the two directories its units come from (the "local" one Datum writes into, like
// /etc/systemd/system, and a "vendor" one a package would install into, like
// /usr/lib/systemd/system), a small HTTP daemon to run as a unit, and a journal of every systemctl
// the agent runs (a shim first on PATH that records its argv and execs the real systemctl), so a
// test can show that nothing ran, or exactly what did.

import { spawnSync } from 'node:child_process';
import { promises as fs, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { cgroupsOf, userManager, type TestManager } from './systemd-manager';

export interface UnitHost {
  manager: TestManager;
  /** Where Datum's unit files go: the manager's $XDG_CONFIG_HOME/systemd/user (ranked like /etc/systemd/system). */
  local: string;
  /** Where a "package" installs units: $XDG_DATA_HOME/systemd/user (ranked like /usr/lib/systemd/system). */
  vendor: string;
  /** The systemctl calls the agent made since the last reset, one argv each. */
  calls(): string[][];
  resetCalls(): void;
  /** PID 1's and this process's cgroups when the manager started: they must stay as they were. */
  cgroupsBefore: { init: string; self: string };
  stop(): Promise<void>;
}

const SYSTEMCTL = '/usr/bin/systemctl';

export async function startUnitHost(): Promise<UnitHost | { skip: string }> {
  const cgroupsBefore = { init: cgroupsOf(1), self: cgroupsOf('self') };
  const manager = await userManager({ privateOnly: true });
  if ('skip' in manager) return manager;
  const dirs = manager.dirs!;
  const local = path.join(dirs.config, 'systemd/user');
  const vendor = path.join(dirs.data, 'systemd/user');
  await fs.mkdir(local, { recursive: true });
  await fs.mkdir(vendor, { recursive: true });
  const shim = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-systemctl-'));
  const log = path.join(shim, 'calls');
  // One line per call, its arguments separated by \x1f, written at once (calls run concurrently).
  await fs.writeFile(
    path.join(shim, 'systemctl'),
    `#!/bin/sh\nline=$(printf '%s\\037' "$@")\nprintf '%s\\n' "$line" >> '${log}'\nexec ${SYSTEMCTL} "$@"\n`,
    { mode: 0o755 },
  );
  await fs.writeFile(log, '');
  const savedPath = process.env.PATH;
  process.env.PATH = `${shim}:${savedPath ?? ''}`;
  return {
    manager,
    local,
    vendor,
    cgroupsBefore,
    calls: () =>
      readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => line.split('\x1f').slice(0, -1)),
    resetCalls: () => writeFileSync(log, ''),
    stop: async () => {
      process.env.PATH = savedPath;
      await manager.stop();
      await fs.rm(shim, { recursive: true, force: true });
    },
  };
}

/** The calls that change something: everything but the reads (show, is-enabled, list-unit-files). */
const READS = ['show', 'is-enabled', 'list-unit-files'];
export const changes = (calls: string[][]) => calls.filter((argv) => !READS.some((read) => argv.includes(read)));

/** systemctl --user as a person would run it (the real one, not through the journal). */
export function systemctl(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(SYSTEMCTL, ['--user', ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `systemctl --user show` of a unit as a record. */
export function show(unit: string, props: string[]): Record<string, string> {
  const out = systemctl('show', '--timestamp=us+utc', `--property=${props.join(',')}`, '--', unit).stdout;
  return Object.fromEntries(
    out
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

/** The environment of a running process, as the kernel holds it: what it really started with. */
export function environOf(pid: number): Record<string, string> {
  return Object.fromEntries(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

/** A free TCP port on the loopback. */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A daemon for a unit to run: serves GET /health with the GREETING it started with and the
 * config file it read at start (so a test can see which content the running process took).
 */
export async function writeDaemon(dir: string): Promise<string> {
  const file = path.join(dir, 'daemon.js');
  await fs.writeFile(
    file,
    `const fs = require('node:fs');
const [port, config] = process.argv.slice(2);
let read = null;
try { read = fs.readFileSync(config, 'utf8'); } catch {}
require('node:http').createServer((q, s) => s.end(JSON.stringify({ greeting: process.env.GREETING ?? null, config: read }))).listen(Number(port), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`,
  );
  return file;
}

/** A vendor unit file running the daemon: what a package would install. */
export function daemonUnit(daemon: string, port: number, config: string, extra = ''): string {
  return `[Unit]
Description=Datum test daemon
[Service]
Type=exec
Environment=GREETING=vendor
ExecStart=${process.execPath} ${daemon} ${port} ${config}
${extra}[Install]
WantedBy=default.target
`;
}
