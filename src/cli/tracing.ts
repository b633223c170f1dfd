/*
 * A `datum` client command in a trace of its own when OTEL_* turn tracing on (src/tracing): its
 * root span is `datum <command>` (`datum rollout start`), the parent of the workflows it starts
 * and the signals and updates it sends, so the trace of a rollout begins where the operator
 * started it. The spans are flushed before the command returns its exit code.
 *
 * Light: program.ts loads this on every start. With tracing off nothing is loaded.
 */
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { startTracing, stopTracing, type TracingLog } from '../tracing';

/** Long-running commands that set up their own tracing (the worker, the agents) or trace nothing (servers). */
const OWN_TRACING = new Set(['worker', 'agent', 'dev', 'codec-server']);

/** A client command's warnings (a bad OTEL_* setting, a collector that does not answer) on stderr. */
const stderr: TracingLog = { warn: (message) => process.stderr.write(`datum: warning: ${message}\n`) };

export async function traced(command: CommandUnknownOpts, version: () => string, run: () => Promise<number>): Promise<number> {
  const names: string[] = [];
  for (let c: CommandUnknownOpts | null = command; c?.parent; c = c.parent) names.unshift(c.name());
  if (OWN_TRACING.has(names[0])) return run();
  const tracing = await startTracing({ component: 'cli', version: version(), log: stderr });
  if (!tracing) return run();
  try {
    return await tracing.inRootSpan(`datum ${names.join(' ')}`, async (span) => {
      span.setAttribute('datum.command', names.join(' '));
      const code = await run();
      span.setAttribute('datum.exit_code', code);
      return code;
    });
  } finally {
    await stopTracing();
  }
}
