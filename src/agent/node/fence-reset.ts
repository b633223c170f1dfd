import path from 'node:path';
import { InvalidAgentConfig, type FenceReset } from '../../domain';
import { withFix } from '../../contract';
import { forgetClaimGenerationsAbove } from './claims';
import { loadAgentConfig } from '../config';
import { holdAsResetter } from './holder';
import { RootRefused, lockRootAlone } from './root-lease';
import { AgentJournal, FenceNotAbove } from './journal';
import { realRoot } from '../fs';

/*
 * The node side of `datum agent reset-fence` (src/cli/commands/reset-fence.ts): the one way the
 * node's generation fence moves down. Every refusal says what is wrong and what to do instead.
 */

export interface FenceResetRequest {
  configPath: string;
  node: string;
  to: number;
  by: string;
  reason: string;
}

/** Thrown for a reset that is refused; its message is "<problem> — fix: <fix>". */
export class FenceResetRefused extends Error {
  override readonly name = 'FenceResetRefused';
}

const refused = (problem: string, fix: string) => new FenceResetRefused(withFix(problem, fix));

export async function resetNodeFence(request: FenceResetRequest): Promise<{ reset: FenceReset; log: string }> {
  const { configPath, node, to, by, reason } = request;
  // 1. The node's own agent.yaml says which node this is and where its root is.
  const config = await loadAgentConfig(configPath).catch((err: unknown) => {
    throw err instanceof InvalidAgentConfig ? new FenceResetRefused(err.message) : err;
  });
  if (config.node !== node)
    throw refused(
      `${configPath} is the agent.yaml of node ${config.node}, not of node ${node}`,
      `give --node ${config.node}, or the --config of node ${node}'s agent`,
    );
  const root = await realRoot(config.root, false);
  // 2. There must be a fence above --to; said before the root is taken, which writes into .datum.
  const journal = new AgentJournal(root);
  const accepted = await journal.acceptedGeneration();
  if (accepted === null || to >= accepted.generation) throw notBelow(new FenceNotAbove(to, accepted?.generation ?? null), node);
  // 3. No agent may serve the root meanwhile: the root's kernel lock, which a running agent holds.
  const lock = await lockRootAlone(root, node).catch((err: unknown) => {
    throw err instanceof RootRefused ? refusedBusy(err, root, node) : err;
  });
  const forget = await holdAs(root, node);
  try {
    // 4. The fence moves down (fence.json, written as the agent writes it), the reset is logged,
    //    and the claims of the mistaken generation no longer outrank the next one's.
    const reset = await journal.reset(to, by, reason, new Date()).catch((err: unknown) => {
      throw err instanceof FenceNotAbove ? notBelow(err, node) : err;
    });
    await forgetClaimGenerationsAbove(root, to);
    return { reset, log: path.join(root, '.datum', 'fence-resets.jsonl') };
  } finally {
    await forget();
    await lock.release();
  }
}

/** The reset says who holds the root while it runs (holder.json, for an agent's refusal message). */
const holdAs = (root: string, node: string) => holdAsResetter(root, node, new Date()).catch(() => () => Promise.resolve());

/** An agent holds the root: the refusal names it, and says how to stop it. */
function refusedBusy(err: RootRefused, root: string, node: string): FenceResetRefused {
  return refused(
    `${err.message.split(' — fix:')[0]}, and the agent's records can only be changed while no agent runs`,
    `stop the agent of node ${node} first (systemctl stop datum-agent@${node}), run this again, then start the agent`,
  );
}

function notBelow(err: FenceNotAbove, node: string): FenceResetRefused {
  if (err.current === null)
    return refused(`node ${node} has no generation fence (no generation was ever accepted for it)`, 'nothing to reset');
  return refused(
    `--to ${err.to} is not below the fence of node ${node}, which is at generation ${err.current}`,
    `give --to below ${err.current}: the last generation that was right, such as the one before the generation published by mistake`,
  );
}
