import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { projectRoot } from '../../src/worker/paths';

const run = promisify(execFile);

/** bin/datum.js of this checkout: the command a person runs. */
export const DATUM = path.join(projectRoot(), 'bin', 'datum.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `datum args…` in a child process, as a person runs it, with `env` over this process's
 * environment (a variable set to undefined is removed). Its exit code and output, whatever the
 * code: the tests assert on failures as much as on successes.
 */
export async function runDatum(args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k];
  try {
    const { stdout, stderr } = await run(process.execPath, [DATUM, ...args], { env: childEnv, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number | string; stdout: string; stderr: string };
    // A spawn failure (ENOENT, a buffer overflow) has no exit code: let it fail the test as itself.
    if (typeof err.code !== 'number') throw e;
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}
