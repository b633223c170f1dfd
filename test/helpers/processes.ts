import { readdirSync, readlinkSync } from 'node:fs';

/**
 * Kills (SIGKILL) every process running inside `dir`: the services the agents of a test started
 * there outlive their agent by design (a restarted agent adopts them), so a test's teardown
 * stops them itself before it removes the directory. Returns the pids it killed.
 */
export function killProcessesUnder(dir: string): number[] {
  const killed: number[] = [];
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let cwd: string;
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      continue; // gone, or not ours to read
    }
    if (cwd !== dir && !cwd.startsWith(`${dir}/`)) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // ended meanwhile
    }
  }
  return killed;
}
