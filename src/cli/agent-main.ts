/*
 * `datum-agent`: the node agent on its own, the entry point of the packaged agent (`npm run
 * package` bundles it into one file, src/packaging/bundle.ts). The same command as `datum agent`
 * (the same options, checks and run: src/cli/program.ts declares them once), without the rest of
 * the `datum` tree, so the bundle holds the agent's code and no workflow code, controller or dev
 * stack.
 */
import { Command, type CommandUnknownOpts } from '@commander-js/extra-typings';
import { agentCommand } from './commands/agent';
import { runProgram } from './main';
import { datumVersion } from './command';
import { Invocation } from './invocation';
import { agentCommandOn } from './program';

export function buildAgentProgram(inv: Invocation): CommandUnknownOpts {
  const program = new Command('datum-agent').version(`datum-agent ${datumVersion()}`, '-V, --version', 'print the version');
  // Imported statically, unlike in the `datum` tree: a module reached by import() keeps all its
  // exports in a bundle.
  return agentCommandOn(program, inv, () => Promise.resolve(agentCommand));
}

/** `datum-agent ARGS…` → its exit code, as `main` is for `datum`. */
export async function agentMain(argv: string[]): Promise<number> {
  const inv = new Invocation();
  return runProgram(buildAgentProgram(inv), inv, argv);
}
