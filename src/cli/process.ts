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

/**
 * For a command that repeats until Ctrl-C (`status --watch`, `ledger --follow`): whether it was
 * asked to stop, and a sleep that a stop cuts short.
 */
export function untilStopped(): { stopped: () => boolean; sleep: (ms: number) => Promise<void> } {
  let stopped = false;
  let wake: () => void = () => undefined;
  void untilSignal(() => {
    stopped = true;
    wake();
  });
  // Not unref'd: a command that only reads a local file (`ledger --follow` on SQLite) has nothing
  // else to keep it running between looks.
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  return { stopped: () => stopped, sleep };
}

/**
 * Runs a command line as this process: its exit code becomes the process's, and a failure (a
 * non-zero code or a thrown error, printed with its stack as `<name>: …`) ends the process within
 * a second even when a connection or worker it opened still holds the event loop, so a unit or a
 * container restarts it instead of watching it hang. The timer is unreferenced: a process that
 * ends by itself is not held back. bin/datum.js runs `datum` through it, the packaged agent
 * `datum-agent`.
 */
export function runAsProcess(name: string, run: () => Promise<number>): void {
  const exitSoon = (code: number) => setTimeout(() => process.exit(code), 1000).unref();
  run().then(
    (code) => {
      process.exitCode = code;
      if (code !== 0) exitSoon(code);
    },
    (error: unknown) => {
      process.stderr.write(`${name}: ${error instanceof Error && error.stack ? error.stack : String(error)}\n`);
      process.exitCode = 1;
      exitSoon(1);
    },
  );
}
