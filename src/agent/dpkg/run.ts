import { spawn } from 'node:child_process';
import { asyncLocalStorage } from '@temporalio/activity';

/*
 * How the agent runs dpkg, dpkg-query, dpkg-deb and apt-get: in an environment of its own making,
 * never the agent's (a DPKG_ROOT or DPKG_ADMINDIR there would move dpkg to another database, a
 * locale would change the messages Datum reads), with stdin at /dev/null (a conffile prompt
 * fails instead of waiting for a person), in a process group of its own so apt-get and the dpkg it
 * starts end together, bounded in time, and killed when the activity is cancelled.
 */

/** dpkg checks its PATH for ldconfig and start-stop-daemon (/usr/sbin), whatever the agent's PATH is. */
export const TOOL_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The most of a tool's output the agent keeps: its tail, where dpkg and apt say what went wrong. */
const OUTPUT_CAP = 64 * 1024;
/** How long a killed tool has between SIGTERM and SIGKILL. */
const KILL_GRACE_MS = 5000;

export interface ToolRun {
  /** The exit code; null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stdout and stderr as they came, interleaved (their tail when longer than OUTPUT_CAP). */
  output: string;
  /** Why the agent ended it: its time ran out, or the activity was cancelled. */
  ended: 'timeout' | 'cancelled' | null;
}

/** A tool that could not be started at all (not installed: ENOENT). */
export class ToolMissing extends Error {
  constructor(
    readonly tool: string,
    readonly code: string,
  ) {
    super(`${tool} cannot be run on this host (${code})`);
  }
}

/**
 * The environment every tool runs in: a fixed PATH and the C locale, and the agent's HOME (dpkg
 * reads $HOME/.dpkg.cfg as it reads /etc/dpkg/dpkg.cfg.d: the host's own configuration of its
 * package manager), plus `extra` (apt's APT_CONFIG and DEBIAN_FRONTEND).
 */
export function toolEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: TOOL_PATH, LANG: 'C', LC_ALL: 'C', ...(process.env.HOME ? { HOME: process.env.HOME } : {}), ...extra };
}

/** Keeps the last OUTPUT_CAP characters of what is appended. */
class Tail {
  text = '';
  add(chunk: string): void {
    this.text = (this.text + chunk).slice(-OUTPUT_CAP);
  }
}

/**
 * Runs `tool args…` to its end, or until `timeoutMs` or the activity's cancellation, when its
 * whole process group is sent SIGTERM, then SIGKILL. Resolves with what it exited with and said;
 * rejects only when it could not be started (ToolMissing).
 */
export function runTool(
  tool: string,
  args: string[],
  options: { timeoutMs: number; env?: NodeJS.ProcessEnv; cwd?: string },
): Promise<ToolRun> {
  const cancel = asyncLocalStorage.getStore()?.cancellationSignal;
  return new Promise((resolve, reject) => {
    const child = spawn(tool, args, {
      env: options.env ?? toolEnv(),
      cwd: options.cwd ?? '/',
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const out = new Tail();
    const err = new Tail();
    const both = new Tail();
    let ended: ToolRun['ended'] = null;
    let grace: NodeJS.Timeout | undefined;
    const kill = (why: 'timeout' | 'cancelled') => {
      if (ended !== null || child.pid === undefined) return;
      ended = why;
      signalGroup(child.pid, 'SIGTERM');
      grace = setTimeout(() => signalGroup(child.pid!, 'SIGKILL'), KILL_GRACE_MS);
    };
    const timer = setTimeout(() => kill('timeout'), options.timeoutMs);
    const onCancel = () => kill('cancelled');
    if (cancel?.aborted) onCancel();
    cancel?.addEventListener('abort', onCancel);
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out.add(c), both.add(c)));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (err.add(c), both.add(c)));
    const done = () => {
      clearTimeout(timer);
      clearTimeout(grace);
      cancel?.removeEventListener('abort', onCancel);
    };
    child.on('error', (e: NodeJS.ErrnoException) => {
      done();
      reject(new ToolMissing(tool, e.code ?? e.message));
    });
    child.on('close', (code, signal) => {
      done();
      resolve({ code, signal, stdout: out.text, stderr: err.text, output: both.text, ended });
    });
  });
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/** The last `n` non-empty lines of a tool's output, joined with " / ": what a ledger line can hold. */
export function lastLines(output: string, n = 4): string {
  return output
    .split(/\r?\n|\r/)
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .slice(-n)
    .join(' / ');
}
