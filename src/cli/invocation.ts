import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { datumVersion, type CommandModule } from './command';
import { traced } from './tracing';

/**
 * One invocation of the tree. An action records the command it belongs to, loads its module,
 * checks its input and, unless only parsing (the fuzz tests' parse layer), runs it.
 */
export class Invocation {
  code = 0;
  parsed: unknown = undefined;
  command: CommandUnknownOpts | null = null;

  constructor(readonly parseOnly = false) {}

  async go<Raw, Input>(command: CommandUnknownOpts, load: () => Promise<CommandModule<Raw, Input>>, raw: Raw): Promise<void> {
    this.command = command;
    const module = await load();
    const input = await module.input(raw);
    if (this.parseOnly) this.parsed = input;
    // In a trace of its own when OTEL_* turn tracing on (src/cli/tracing.ts).
    else this.code = await traced(command, datumVersion, () => module.run(input));
  }
}
