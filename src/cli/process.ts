/** Resolves after SIGINT or SIGTERM, having called `stop` once; a second signal exits at once. */
export function untilSignal(stop: () => void | Promise<void>): Promise<void> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write(`received ${signal} again: exiting now\n`);
        process.exit(130);
      }
      stopping = true;
      Promise.resolve(stop()).then(resolve, resolve);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
