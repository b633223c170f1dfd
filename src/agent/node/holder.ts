import { OPEN_FLAGS, readJsonAt, writeJsonAt, isErrno, inDatumDir } from '../fs';
import { startTicks } from '../services/identity';

/*
 * Which process works on a node root now: <root>/.datum/holder.json. The agent serialises every
 * change to its records with a lock that lives in its own process (src/agent/node/lock.ts), so a
 * command that changes those records from another process (`datum agent reset-fence`) must know
 * that no agent serves the root meanwhile. A running agent keeps its pid and the process's start
 * time there; a pid alone is not proof, since the kernel hands a dead agent's pid to the next
 * process, while pid + start time (/proc/<pid>/stat) names one process for good. A holder whose
 * process is gone (killed, the machine rebooted) holds nothing.
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
  const found = (await inDatumDir(root, '', false, (dir) => readJsonAt(dir, NAME), null)) as RootHolder | null;
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

/**
 * Takes `root` for a command that changes the agent's records from outside it: created only
 * where no record is (O_EXCL), so of two that start at once one wins; a record whose process is
 * gone is removed first. Returns the live holder instead when there is one, and nothing is taken.
 */
export async function holdExclusively(
  root: string,
  node: string,
  at: Date,
): Promise<{ held: true; release: () => Promise<void> } | { held: false; holder: RootHolder }> {
  const own = await holderOf(process.pid, 'reset-fence', node, at);
  for (let attempt = 0; attempt < 2; attempt++) {
    const created = await inDatumDir(
      root,
      '',
      true,
      async (dir) => {
        try {
          const handle = await dir.open(NAME, OPEN_FLAGS.createNew);
          await handle.writeFile(`${JSON.stringify(own, null, 2)}\n`);
          await handle.sync();
          await handle.close();
          return true;
        } catch (err) {
          if (isErrno(err, 'EEXIST')) return false;
          throw err;
        }
      },
      false,
    );
    if (created) return { held: true, release: async () => await releaseIfOwn(root, own) };
    const holder = await liveHolder(root);
    if (holder !== null) return { held: false, holder };
    // Left by a process that is gone: remove it and try once more.
    await inDatumDir(root, '', false, (dir) => dir.remove(NAME), undefined);
  }
  const holder = await liveHolder(root);
  if (holder !== null) return { held: false, holder };
  throw new Error(`${root}/.datum/${NAME} keeps coming back: another process is taking the root at the same time`);
}

/** Whether `root` is still held by this very process (the record was not replaced meanwhile). */
export async function stillHeld(root: string): Promise<boolean> {
  const found = (await inDatumDir(root, '', false, (dir) => readJsonAt(dir, NAME), null)) as RootHolder | null;
  return found !== null && found.pid === process.pid && found.started === (await startTicks(process.pid));
}

async function releaseIfOwn(root: string, own: RootHolder): Promise<void> {
  await inDatumDir(
    root,
    '',
    false,
    async (dir) => {
      const found = (await readJsonAt(dir, NAME)) as RootHolder | null;
      if (same(found, own)) await dir.remove(NAME);
    },
    undefined,
  );
}
