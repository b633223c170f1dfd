import path from 'node:path';
import { withFix } from '../../contract';
import {
  ancestorIds,
  identityOf,
  lockExclusive,
  registerRoot,
  registeredRoots,
  registeredAt,
  unregisterRoot,
  type HeldLock,
  type RegisterReads,
  type RegisteredRoot,
} from '../fs';
import { holdAsAgent, liveHolder } from './holder';

/*
 * One root, one agent, host-wide (issue 30). An agent holds each root it serves with a kernel
 * lock on a descriptor of the root directory itself, which no file's content decides: a second
 * agent, or `datum agent reset-fence`, is refused while the first lives, and nothing is left
 * behind when it dies (the kernel drops the lock). It also registers the root host-wide, by device
 * and inode (src/agent/fs/registry.ts), and refuses a root that contains, or lies inside, a root
 * another agent serves, whichever process serves it. <root>/.datum/holder.json only says who holds
 * it, for messages: a forged one decides nothing.
 */

/** Why a root cannot be taken: held by another process, or nested with another agent's. */
export class RootRefused extends Error {
  override readonly name = 'RootRefused';
}

/** What an agent holds for one root while it serves it; release() gives it up (the kernel does when the process dies). */
export interface RootLease {
  release(): Promise<void>;
}

/**
 * Takes `root` (a real path) for the agent of `node` configured in `config`: locked, registered,
 * and checked against every other root of the host. An agent taking several roots passes the same
 * `reads` to each, so what other processes registered is read once.
 */
export async function takeRoot(root: string, node: string, config: string, reads: RegisterReads = new Map()): Promise<RootLease> {
  const lock = await lockExclusive(root);
  if (lock === null) throw await busy(root, node);
  let entry: HeldLock | null = null;
  try {
    // Registered before the others are looked at: of two nested roots taken at once, each sees the other.
    entry = await registerRoot(lock.id, { root, node, pid: process.pid, config, since: new Date().toISOString() });
    if (entry === null)
      throw new RootRefused(withFix(`${root} is registered by another process`, 'stop the other agent of this root'));
    await refuseNested(root, lock.id.dev, lock.id.ino, reads);
    const forget = await holdAsAgent(root, node, new Date()).catch(() => () => Promise.resolve());
    const held = entry;
    return {
      release: async () => {
        await forget();
        await unregisterRoot(held);
        await lock.release();
      },
    };
  } catch (err) {
    if (entry) await unregisterRoot(entry);
    await lock.release();
    throw err;
  }
}

/** Takes `root` for a command that changes its records from outside the agent (reset-fence): the same lock, no registration. */
export async function lockRootAlone(root: string, node: string): Promise<HeldLock> {
  const lock = await lockExclusive(root);
  if (lock === null) throw await busy(root, node);
  return lock;
}

async function busy(root: string, node: string): Promise<RootRefused> {
  const holder = await liveHolder(root).catch(() => null);
  const who = holder
    ? holder.kind === 'agent'
      ? `an agent (pid ${holder.pid}, node ${holder.node}, since ${holder.since})`
      : `\`datum agent reset-fence\` (pid ${holder.pid}, since ${holder.since})`
    : 'another process';
  return new RootRefused(
    withFix(
      `${root} is held by ${who}: one node root is served by one agent at a time`,
      holder?.kind === 'reset-fence'
        ? 'wait for the reset to finish, then start the agent again'
        : `stop the other agent of node ${holder?.node ?? node} first (systemctl stop datum-agent@${holder?.node ?? node}), or give this node a root of its own`,
    ),
  );
}

/** Refuses `root` when it lies inside, or contains, a root another agent of the host serves. */
async function refuseNested(root: string, dev: number, ino: number, reads: RegisterReads): Promise<void> {
  const fix = 'give every node a root of its own, side by side (such as /var/lib/datum/<node>), never one inside another';
  const named = (r: RegisteredRoot) => `${r.root}, the root of node ${r.node} (pid ${r.pid}, ${r.config})`;
  for (const { dir, id } of await ancestorIds(root)) {
    const outer = await registeredAt(id);
    if (outer)
      throw new RootRefused(
        withFix(`${root} lies inside ${dir === outer.root ? named(outer) : `${dir}, which is ${named(outer)}`}`, fix),
      );
  }
  // Only an entry whose root lies inside this one, and is still that directory, is probed for a live holder.
  const within = async (other: RegisteredRoot & { id: { dev: number; ino: number } }) => {
    if (other.id.dev === dev && other.id.ino === ino) return false;
    const inside = path.relative(root, other.root);
    if (inside === '' || inside.startsWith('..') || path.isAbsolute(inside)) return false;
    const now = await identityOf(other.root);
    return now !== null && now.dev === other.id.dev && now.ino === other.id.ino;
  };
  const [other] = await registeredRoots(within, reads);
  if (other) throw new RootRefused(withFix(`${root} contains ${named(other)}`, fix));
}
