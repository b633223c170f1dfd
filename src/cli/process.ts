/**
 * Resolves after SIGINT or SIGTERM, having called `stop` once. A second signal calls `force`
 * (which must leave nothing behind) and exits at once. A repeat within two seconds of the first
 * is the same Ctrl-C arriving twice (the terminal signals the whole process group and `npm start`
 * forwards it again), so it is not taken as the impatient second press.
 */
export function untilSignal(stop: () => void | Promise<void>, force: () => void = () => undefined): Promise<void> {
  return new Promise((resolve) => {
    let firstAt: number | null = null;
    const onSignal = (signal: NodeJS.Signals) => {
      if (firstAt !== null) {
        if (Date.now() - firstAt < 2000) return;
        process.stderr.write(`received ${signal} again: stopping everything now\n`);
        force();
        process.exit(130);
      }
      firstAt = Date.now();
      Promise.resolve(stop()).then(resolve, resolve);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}
