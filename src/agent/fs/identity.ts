import path from 'node:path';
import { pathOfTarget } from '../../domain';
import { locate } from './paths';

/*
 * A target's identity is what is written, not how its path is spelled. With `conf -> etc/app`
 * inside the root, "file:conf/app.conf" and "file:etc/app/app.conf" are one file, and whatever
 * protects the one protects the other. The agent resolves every path target it compares (a file's
 * or a directory's: a resource's, an agent.yaml entry's, a claim's, a decision's) the way its
 * write would reach it:
 * every symlinked parent followed while it stays inside the root (src/agent/fs/paths.ts `locate`), the
 * final name not followed (a symlink there is an obstruction, never written through). Flags, the
 * release and services have one spelling each and are their own identity.
 *
 * A path that cannot be resolved (it leaves the root, a parent is a file, the tree is reshaped
 * meanwhile) keeps its spelling: nothing is written there anyway, since the write meets the same
 * refusal.
 */

/** Maps targets to their identity on one root; each spelling is resolved once per use. */
export type Identify = (target: string) => string;

/** `target` as the agent would write it under `root` now: a path target (a file, a directory) resolved, any other as it is. */
export async function resolveTarget(root: string, target: string): Promise<string> {
  const spelled = pathOfTarget(target);
  if (spelled === null) return target;
  const type = target.slice(0, target.length - spelled.length - 1);
  try {
    const loc = await locate(root, spelled, `${type} path`);
    return `${type}:${path.relative(root, loc.abs).split(path.sep).join('/')}`;
  } catch {
    return target;
  }
}

/**
 * The identities of `targets` under `root`, resolved now, as a function (targets not listed
 * are their own identity). Synchronous to use, so the pure protection rules of claims.ts can
 * take it.
 */
export async function identify(root: string, targets: Iterable<string>): Promise<Identify> {
  const resolved = new Map<string, string>();
  for (const target of new Set(targets)) resolved.set(target, await resolveTarget(root, target));
  return (target) => resolved.get(target) ?? target;
}

/** Every target is its own identity: records that cannot be resolved (no root). */
export const asSpelled: Identify = (target) => target;
