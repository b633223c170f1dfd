/*
 * The codec server's entry point until `datum codec-server` wires it into the CLI:
 * `node dist/src/codec/main.js`, configured by the environment (src/codec/server-config.ts).
 * Runs until SIGINT or SIGTERM.
 */
import { runCodecServer } from './server';
import { codecServerOptionsFromEnv } from './server-config';

async function main(): Promise<void> {
  const server = await runCodecServer(codecServerOptionsFromEnv());
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
}

main().catch((error: unknown) => {
  process.stderr.write(`datum codec-server: ${(error as Error).message}\n`);
  process.exitCode = 1;
});
