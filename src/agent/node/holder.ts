import { readJsonAt, writeJsonAt, isErrno, inDatumDir } from '../fs';
import { limits } from '../limits';
import { startTicks } from '../services/identity';

/*
 * Who works on a node root now, for messages: <root>/.datum/holder.json, the pid and start time
 * of the agent (or `datum agent reset-fence`) that holds the root. What decides is the root's
 * kernel lock (src/agent/node/root-lease.ts): this record is written once the lock is held, and a
 * record whose process is gone, or one forged, decides nothing. A pid alone is not proof, since
 * the kernel hands a dead agent's pid to the next process; pid + start time (/proc/<pid>/stat)
 * names one process for good.
 */

const NAME = 'holder.json';

export interface RootHolder {
  kind: 'agent' | 'reset-fence';
  pid: number;
  /** Field 22 of /proc/<pid>/stat (clock ticks since boot); null where /proc is not there. */
  started: string | null;
  node: string;
  since: string;
}

/** Whether the process a holder names still runs: the same pid and, where /proc tells, the same start. */
async function alive(holder: RootHolder): Promise<boolean> {
  if (holder.started !== null) return (await startTicks(holder.pid)) === holder.started;
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (err) {
    return isErrno(err, 'EPERM');
  }
}

const holderOf = async (pid: number, kind: RootHolder['kind'], node: string, at: Date): Promise<RootHolder> => ({
  kind,
  pid,
  started: await startTicks(pid),
  node,
  since: at.toISOString(),
});

/** The process that holds `root` now, or null when none does (no record, or its process is gone). */
export async function liveHolder(root: string): Promise<RootHolder | null> {
  const found = (await inDatumDir(
    root,
    '',
    false,
    (dir) => readJsonAt(dir, NAME, limits.smallRecordBytes),
    null,
  )) as RootHolder | null;
  if (!found || typeof found !== 'object' || !Number.isSafeInteger(found.pid)) return null;
  return (await alive(found)) ? found : null;
}

const same = (a: RootHolder | null, b: RootHolder) => a !== null && a.pid === b.pid && a.started === b.started;

/**
 * The agent's record that it serves `root`, written when it starts (replacing one a killed agent
 * left); the returned function removes it, if it is still this process's, when the agent stops.
 */
export async function holdAsAgent(root: string, node: string, at: Date): Promise<() => Promise<void>> {
  const own = await holderOf(process.pid, 'agent', node, at);
  await inDatumDir(root, '', true, (dir) => writeJsonAt(dir, NAME, own), undefined);
  return async () => await releaseIfOwn(root, own);
}

/** The same record while `datum agent reset-fence` holds the root (it holds the root's lock, src/agent/node/root-lease.ts). */
export async function holdAsResetter(root: string, node: string, at: Date): Promise<() => Promise<void>> {
  const own = await holderOf(process.pid, 'reset-fence', node, at);
  await inDatumDir(root, '', true, (dir) => writeJsonAt(dir, NAME, own), undefined);
  return async () => await releaseIfOwn(root, own);
}

async function releaseIfOwn(root: string, own: RootHolder): Promise<void> {
  await inDatumDir(
    root,
    '',
    false,
    async (dir) => {
      const found = (await readJsonAt(dir, NAME, limits.smallRecordBytes)) as RootHolder | null;
      if (same(found, own)) await dir.remove(NAME);
    },
    undefined,
  );
}
