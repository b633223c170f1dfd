import type { CommandModule } from '../command';
import { untilSignal } from '../process';

/**
 * `datum codec-server`: the Temporal codec server for the Web UI and the `temporal` CLI
 * (src/codec/server.ts), configured by the environment (src/codec/server-config.ts: the keyring,
 * the bearer token it requires, the origins it answers). Runs until SIGINT or SIGTERM.
 */
export const codecServerCommand: CommandModule<Record<string, unknown>, Record<string, unknown>> = {
  input: (values) => values,
  async run() {
    const [{ runCodecServer }, { codecServerOptionsFromEnv }] = await Promise.all([
      import('../../codec/server.js'),
      import('../../codec/server-config.js'),
    ]);
    const server = await runCodecServer(codecServerOptionsFromEnv());
    await untilSignal(() => undefined);
    await server.close();
    return 0;
  },
};
