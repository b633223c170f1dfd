import { Writable } from 'node:stream';
import { format } from 'node:util';
import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';
import { pino, type Logger as Pino } from 'pino';
import { withFix } from '../contract';

/*
 * Structured logs for every Datum process: pino, installed as the Temporal SDK's logger, so the
 * SDK's own lines, the core's forwarded lines, the workflows' `log` (replay-safe: nothing is
 * logged again while a history replays) and the activities' `log` (carrying the workflow and
 * activity ids) all come out as one stream of JSON lines on stdout, or as text.
 *
 * --log-level and --log-format are the names the `temporal` CLI uses; DATUM_LOG_LEVEL and
 * DATUM_LOG_FORMAT set them without a flag.
 */

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'never'] as const;
export const LOG_FORMATS = ['json', 'text'] as const;
export type DatumLogLevel = (typeof LOG_LEVELS)[number];
export type DatumLogFormat = (typeof LOG_FORMATS)[number];

export const LOG_LEVEL_ENV = 'DATUM_LOG_LEVEL';
export const LOG_FORMAT_ENV = 'DATUM_LOG_FORMAT';

export class LoggingConfigError extends Error {
  override readonly name = 'LoggingConfigError';
}

export interface LoggingOptions {
  /** From --log-level; else DATUM_LOG_LEVEL; else info. */
  level?: string;
  /** From --log-format; else DATUM_LOG_FORMAT; else json. */
  format?: string;
  /** Written on every line: which Datum process this is (worker, agent, …). */
  component: string;
  /** Where lines go (default stdout); tests pass their own. */
  destination?: NodeJS.WritableStream;
}

function pick<T extends string>(given: string | undefined, env: string, allowed: readonly T[], fallback: T, flag: string): T {
  const fromFlag = given !== undefined;
  const raw = (fromFlag ? given : process.env[env])?.trim().toLowerCase() ?? '';
  if (raw === '') return fallback;
  if ((allowed as readonly string[]).includes(raw)) return raw as T;
  throw new LoggingConfigError(
    withFix(
      `${fromFlag ? flag : env} "${given ?? process.env[env]}" is not a log ${flag.replace('--log-', '')}`,
      `use one of ${allowed.join(', ')}`,
    ),
  );
}

export function resolveLogging(options: LoggingOptions): { level: DatumLogLevel; format: DatumLogFormat } {
  return {
    level: pick(options.level, LOG_LEVEL_ENV, LOG_LEVELS, 'info', '--log-level'),
    format: pick(options.format, LOG_FORMAT_ENV, LOG_FORMATS, 'json', '--log-format'),
  };
}

/** The process's pino logger. */
export function createLogger(options: LoggingOptions): Pino {
  const { level, format } = resolveLogging(options);
  const out = options.destination ?? process.stdout;
  const destination = format === 'text' ? textLines(out) : out;
  return pino(
    {
      level: level === 'never' ? 'silent' : level,
      base: { component: options.component, pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}

/**
 * console.warn and console.error of this process (a library's, or a store's own warning such as
 * a dropped PostgreSQL connection) become structured lines of `logger` at warn and error, so a
 * process that logs JSON never mixes plain text into its stream. For the processes Datum runs
 * (worker, agent); returns what puts the console back.
 */
export function routeConsole(logger: Pino): () => void {
  const saved = { warn: console.warn, error: console.error };
  console.warn = (...args: unknown[]) => logger.warn({ source: 'console' }, format(...args));
  console.error = (...args: unknown[]) => logger.error({ source: 'console' }, format(...args));
  return () => {
    console.warn = saved.warn;
    console.error = saved.error;
  };
}

/** One line per entry: "<time> <LEVEL> <message> key=value …", for a person at a terminal. */
function textLines(out: NodeJS.WritableStream): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line === '') continue;
        const entry = JSON.parse(line) as Record<string, unknown>;
        const { time, level, msg, component: _component, pid: _pid, ...rest } = entry;
        const fields = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
        out.write(
          `${String(time)} ${String(level).toUpperCase().padEnd(5)} ${String(msg)}${fields.length ? ` ${fields.join(' ')}` : ''}\n`,
        );
      }
      done();
    },
  });
}

const PINO_LEVEL: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/** The Temporal SDK's Logger interface on pino: what the Runtime, workflows and activities log through. */
export class SdkLogger implements Logger {
  constructor(readonly pino: Pino) {}

  log(level: LogLevel, message: string, meta?: LogMetadata): void {
    this.pino[PINO_LEVEL[level]](meta ?? {}, message);
  }
  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }
  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }
  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }
  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }
  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}

/** The core's filter for a level: its own lines at that level, everything else's at warn or worse. */
export function coreFilter(level: DatumLogLevel): string {
  const core = level === 'never' ? 'ERROR' : level.toUpperCase();
  return `temporal_sdk_core=${core},temporal_client=${core},temporal_sdk=${core},warn`;
}
