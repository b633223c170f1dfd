import path from 'node:path';
import { InvalidAgentConfig, type FenceReset } from '../../domain';
import { withFix } from '../../contract';
import { forgetClaimGenerationsAbove } from './claims';
import { loadAgentConfig } from '../config';
import { holdExclusively, stillHeld, type RootHolder } from './holder';
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
  // 3. No agent may serve the root meanwhile: its lock lives in its own process.
  const hold = await holdExclusively(root, node, new Date());
  if (!hold.held) throw holderRunning(hold.holder, root, node);
  try {
    // 4. The fence moves down (fence.json, written as the agent writes it), the reset is logged,
    //    and the claims of the mistaken generation no longer outrank the next one's.
    const reset = await journal.reset(to, by, reason, new Date()).catch((err: unknown) => {
      throw err instanceof FenceNotAbove ? notBelow(err, node) : err;
    });
    await forgetClaimGenerationsAbove(root, to);
    if (!(await stillHeld(root)))
      throw refused(
        `an agent started on ${root} while the fence was being reset (the reset from ${reset.from} to ${reset.to} is recorded)`,
        `stop that agent, check ${path.join(root, '.datum', 'fence.json')}, and run this again if the fence is not at ${to}`,
      );
    return { reset, log: path.join(root, '.datum', 'fence-resets.jsonl') };
  } finally {
    await hold.release();
  }
}

function notBelow(err: FenceNotAbove, node: string): FenceResetRefused {
  if (err.current === null)
    return refused(`node ${node} has no generation fence (no generation was ever accepted for it)`, 'nothing to reset');
  return refused(
    `--to ${err.to} is not below the fence of node ${node}, which is at generation ${err.current}`,
    `give --to below ${err.current}: the last generation that was right, such as the one before the generation published by mistake`,
  );
}

function holderRunning(holder: RootHolder, root: string, node: string): FenceResetRefused {
  const who =
    holder.kind === 'agent'
      ? `an agent (pid ${holder.pid}, serving since ${holder.since}) serves node ${holder.node} on ${root}`
      : `another \`datum agent reset-fence\` (pid ${holder.pid}, since ${holder.since}) is resetting ${root}`;
  return refused(
    `${who}, and the agent's records can only be changed while no agent runs`,
    holder.kind === 'agent'
      ? `stop the agent of node ${node} first (systemctl stop datum-agent, or end pid ${holder.pid}), run this again, then start the agent`
      : 'wait for it to finish, then check whether the fence is where you want it',
  );
}
