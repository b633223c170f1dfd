/**
 * Resolves after SIGINT or SIGTERM, having called `stop` once. A second signal calls `force`
 * (which must leave nothing behind) and exits at once.
 */
export function untilSignal(stop: () => void | Promise<void>, force: () => void = () => undefined): Promise<void> {
  return new Promise((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        process.stderr.write(`received ${signal} again: stopping everything now\n`);
        force();
        process.exit(130);
      }
      stopping = true;
      Promise.resolve(stop()).then(resolve, resolve);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
