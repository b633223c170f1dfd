// Test environments on the pinned Temporal binaries from `npm run setup` (never a download:
// the SDK's default `cached-download` fetches from GitHub, which CI cannot reach).

import { createServer } from 'node:net';
import type { Connection } from '@temporalio/client';
// Not re-exported from the package index; @temporalio/testing itself imports this module path.
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { LocalTestWorkflowEnvironmentOptions } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import type { LogLevel } from '@temporalio/worker';
import { temporalCliPath, temporalTestServerPath } from '../../src/worker/paths';
import { DATUM_SEARCH_ATTRIBUTES } from './search-attributes';

export {
  DATUM_SEARCH_ATTRIBUTES,
  DatumConditions,
  DatumDigest,
  DatumGeneration,
  DatumMode,
  DatumNode,
  DatumStatus,
} from './search-attributes';

const LOG_LEVELS: readonly LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];

/**
 * Installs the SDK runtime with a WARN-level logger (override: DATUM_TEST_LOG_LEVEL=DEBUG …) so
 * worker and bundler chatter does not bury test output. The runtime is a per-process singleton
 * that can only be configured before its first use, hence the check.
 */
export function installTestRuntime(): void {
  if (Runtime._instance !== undefined) return;
  const wanted = (process.env.DATUM_TEST_LOG_LEVEL ?? 'WARN').toUpperCase() as LogLevel;
  Runtime.install({ logger: new DefaultLogger(LOG_LEVELS.includes(wanted) ? wanted : 'WARN') });
}

export interface DevEnvOptions {
  /** Extra `temporal server start-dev` arguments, e.g. `['--dynamic-config-value', 'k=v']`. */
  extraArgs?: string[];
  /** SQLite file to persist to; in-memory by default. */
  dbFilename?: string;
  /** Serve the Temporal Web UI too (off by default: it costs start-up time). `webUiUrl(env)` says where. */
  ui?: boolean;
  /** Port for the Web UI; implies `ui` unless `ui: false`. A free port is chosen when `ui` is set without one. */
  uiPort?: number;
}

const webUiUrls = new WeakMap<TestWorkflowEnvironment, string>();

/** Base URL of the Web UI of a dev server started with `ui` or `uiPort`, e.g. `http://127.0.0.1:41234`. */
export function webUiUrl(env: TestWorkflowEnvironment): string | undefined {
  return webUiUrls.get(env);
}

/**
 * A real Temporal dev server (`temporal server start-dev` on a free port, in-memory SQLite)
 * with Datum's six search attributes registered. Call `teardown()` in `afterAll`.
 */
export async function startDevEnv(options: DevEnvOptions = {}): Promise<TestWorkflowEnvironment> {
  installTestRuntime();
  // The SDK's own default UI port is the server's port + 1000, which nothing reserves: another
  // test file's server may hold it. Ask the OS for a free one instead.
  const uiPort = options.ui === false ? undefined : (options.uiPort ?? (options.ui ? await freePort() : undefined));
  const server: LocalTestWorkflowEnvironmentOptions['server'] = {
    executable: { type: 'existing-path', path: temporalCliPath() },
    // Registered at start-up as `--search-attribute Name=Type` arguments.
    searchAttributes: [...DATUM_SEARCH_ATTRIBUTES],
    extraArgs: options.extraArgs ?? [],
    // The server's own log at WARN is start-up noise (cluster id, ...) in every test run.
    log: { format: 'pretty', level: process.env.DATUM_TEST_SERVER_LOG_LEVEL ?? 'error' },
    ...(options.dbFilename !== undefined ? { dbFilename: options.dbFilename } : {}),
    ...(uiPort !== undefined ? { ui: true, uiPort } : {}),
  };
  const env = await TestWorkflowEnvironment.createLocal({ server });
  // The SDK starts the server with `--ip 127.0.0.1`; the UI binds to the same address.
  if (uiPort !== undefined) webUiUrls.set(env, `http://127.0.0.1:${uiPort}`);
  return env;
}

export async function freePort(): Promise<number> {
  return await new Promise<number>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port from the OS')),
      );
    });
  });
}

/**
 * The Java time-skipping test server: awaiting a workflow result (or `env.sleep`) fast-forwards
 * timers. Time is global to the environment, so do not run workflows in it concurrently from
 * independent tests. Call `teardown()` in `afterAll`.
 */
export async function startTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  installTestRuntime();
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: temporalTestServerPath() } },
  });
  try {
    // The test server has no start-up flag for search attributes (and `searchAttributes` is a
    // dev-server-only option), yet rejects an upsert of an unregistered one: the workflow task
    // then fails and retries forever ("search attribute DatumStatus is not defined").
    await registerDatumSearchAttributes(env.connection);
  } catch (err) {
    await env.teardown();
    throw err;
  }
  return env;
}

/**
 * Registers Datum's search attributes through the OperatorService, for servers started without
 * them (the time-skipping test server, or an existing server from createFromExistingServer).
 */
export async function registerDatumSearchAttributes(connection: Connection, namespace = 'default'): Promise<void> {
  const searchAttributes: Record<string, NonNullable<ReturnType<typeof encodeSearchAttributeIndexedValueType>>> = {};
  for (const { name, type } of DATUM_SEARCH_ATTRIBUTES) {
    const indexedType = encodeSearchAttributeIndexedValueType(type);
    if (indexedType === undefined) throw new TypeError(`no indexed value type for search attribute ${name} (${type})`);
    searchAttributes[name] = indexedType;
  }
  await connection.operatorService.addSearchAttributes({ namespace, searchAttributes });
}
