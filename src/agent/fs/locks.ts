import { spawn } from 'node:child_process';
import { constants, existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import type { FileHandle } from 'node:fs/promises';
import { withFix } from '../../contract';
import type { Identity } from './held';

/*
 * Kernel locks on descriptors: flock(2), which the kernel drops when the last descriptor of the
 * open file description closes, so a crashed process leaves nothing behind that blocks the next.
 * Node has no flock(), so the lock is taken by util-linux flock(1) on a descriptor this process
 * opened and lends it (its fd 3): a flock lock belongs to the open file description, which the
 * child shares, so it stays with this process when the child exits. Node opens every descriptor
 * close-on-exec, so no other child of the agent (a service it starts) ever holds it.
 */

/** flock(1)'s exit code when the lock is held elsewhere (`--conflict-exit-code`), apart from its own errors. */
const CONFLICT = 75;

/** A lock this process holds until release() (or until it dies). */
export class HeldLock {
  constructor(
    private readonly handle: FileHandle,
    readonly path: string,
    /** The locked inode (a root's identity, or a registry entry's). */
    readonly id: Identity,
  ) {}

  /** The open descriptor, for writing a file the lock is taken on. */
  get file(): FileHandle {
    return this.handle;
  }

  async release(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }
}

/**
 * flock(1): on PATH, else where util-linux puts it (every Debian, Ubuntu and RHEL host has it; a
 * unit or a test may run the agent with a PATH of its own).
 */
function flockProgram(): string {
  for (const dir of [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/bin'])
    if (dir && existsSync(path.join(dir, 'flock'))) return path.join(dir, 'flock');
  return 'flock';
}

/** Runs flock(1) with `args` (which say how long it may wait), lending it `handle` as fd 3 when given: its exit code. */
function flock(args: string[], handle?: FileHandle): Promise<number> {
  return new Promise((resolve, reject) => {
    const stdio: Array<'ignore' | 'pipe' | number> = ['ignore', 'ignore', 'pipe'];
    if (handle) stdio.push(handle.fd);
    const child = spawn(flockProgram(), ['--conflict-exit-code', String(CONFLICT), ...args], { stdio });
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'ENOENT'
          ? new Error(withFix('flock(1) is not installed, and the agent holds each node root with it', 'install util-linux'))
          : err,
      ),
    );
    child.on('close', (code) => {
      if (code === 0 || code === CONFLICT) resolve(code);
      else reject(new Error(`flock ${args.join(' ')} failed (exit ${code}): ${stderr.trim()}`));
    });
  });
}

/**
 * An exclusive lock on `path` (a directory, or a file created when `create`), or null when
 * another open file description holds one (another process, or another lock of this one).
 *
 * `patience` is for a file that lockedByAnyone() probes: a probe holds a shared lock for as long
 * as flock(1) and the close after it take, and a taker that gave up at once would read that moment as a live
 * holder (six agents starting together refused one another's registrations so). A probe lets go
 * within milliseconds; a holder keeps its lock for as long as it lives, so waiting `patience`
 * seconds tells the two apart.
 */
export async function lockExclusive(path: string, create = false, patience = 0): Promise<HeldLock | null> {
  const flags = create ? constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW : constants.O_RDONLY;
  const handle = await fs.open(path, flags, 0o644);
  try {
    const st = await handle.stat();
    const wait = patience > 0 ? ['--wait', String(patience)] : ['--nonblock'];
    if ((await flock([...wait, '--exclusive', '3'], handle)) === CONFLICT) {
      await handle.close();
      return null;
    }
    return new HeldLock(handle, path, { dev: st.dev, ino: st.ino });
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
}

/**
 * Whether some process holds an exclusive lock on `path` now: a shared lock taken and dropped at
 * once tells. flock(1) takes it on a descriptor this process opened (fd 3), and closing that
 * descriptor drops it, so no program is run under the lock: a probe by `flock FILE true` needed
 * `true` on PATH, which a unit's or a package's PATH may lack. A file gone meanwhile is held by
 * no one.
 */
export async function lockedByAnyone(path: string): Promise<boolean> {
  let handle: FileHandle;
  try {
    handle = await fs.open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  try {
    return (await flock(['--nonblock', '--shared', '3'], handle)) === CONFLICT;
  } finally {
    await handle.close();
  }
}
