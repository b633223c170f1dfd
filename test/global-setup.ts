import { mkdtempSync, chmodSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/*
 * Compiles src/ to dist/ before any test file runs, so tests that spawn the real `datum` command
 * (bin/datum.js → dist/) run the code under test, never a stale build.
 *
 * And the suite leaves nothing running: every test process gets TMPDIR set to one directory of
 * this run, which the processes they start inherit (agents, Temporal servers, and the services
 * the agents manage, which keep TMPDIR from the agent's environment). At the end, any process
 * still carrying that TMPDIR, or running inside it, was started by a test that did not stop it:
 * the run fails and names it (and the process is killed, so it does not outlive the run).
 */
export default async function setup(): Promise<() => void> {
  const { build } = await import('../scripts/build.mjs');
  build();
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'datum-test-'));
  // PostgreSQL's own user must reach the clusters the tests create under it.
  chmodSync(runDir, 0o755);
  process.env.TMPDIR = runDir;
  // The host's register of node roots (src/agent/fs/registry.ts): one for the run, shared by every
  // agent the tests start (in a test process or as a child), so they see each other as on one host.
  process.env.DATUM_RUNTIME_DIR = path.join(runDir, 'runtime');
  return () => teardown(runDir);
}

interface Leftover {
  pid: number;
  command: string;
  cwd: string;
}

function teardown(runDir: string): void {
  const left = leftovers(runDir);
  for (const p of left) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  rmSync(runDir, { recursive: true, force: true });
  if (left.length > 0) {
    const lines = left.map((p) => `  pid ${p.pid} in ${p.cwd}: ${p.command}`).join('\n');
    // vitest reports an error thrown here but keeps the run's exit code: set it too.
    process.exitCode = 1;
    throw new Error(
      `${left.length} process(es) started by the tests were still running at the end of the run (now killed):\n${lines}\n` +
        '  fix: stop every process a test starts in its afterAll/afterEach (agents, servers, the services agents manage)',
    );
  }
}

/**
 * Processes that inherited this run's TMPDIR or run inside it, except vitest itself and its pool
 * of test processes (this process's own children): whatever those started is a test's to stop.
 */
function leftovers(runDir: string): Leftover[] {
  const mine = new Set([process.pid, ...childrenOf(process.pid)]);
  const found: Leftover[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || mine.has(pid)) continue;
    const environ = read(`/proc/${pid}/environ`);
    const cwd = link(`/proc/${pid}/cwd`);
    const inherited = environ?.split('\0').includes(`TMPDIR=${runDir}`) ?? false;
    if (!inherited && !(cwd.startsWith(`${runDir}/`) || cwd === runDir)) continue;
    const command = (read(`/proc/${pid}/cmdline`) ?? '').split('\0').join(' ').trim();
    // A zombie has no command line; its parent reaps it.
    if (command !== '') found.push({ pid, command: command.slice(0, 200), cwd });
  }
  return found;
}

function childrenOf(parent: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    const stat = read(`/proc/${name}/stat`);
    // The fields after the command's closing parenthesis: state, then the parent's pid.
    if (stat !== null && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === parent) out.push(Number(name));
  }
  return out;
}

function read(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

function link(file: string): string {
  try {
    return readlinkSync(file);
  } catch {
    return '';
  }
}
