/*
 * The operator's connection to Temporal: envconfig (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
 * TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE, temporal.toml) with the `temporal` CLI's
 * flags on top. A flag given on the command line wins over the environment, which wins over
 * the profile, as in the `temporal` CLI.
 *
 * Client commands connect here, never through src/worker/connection.ts: that module loads
 * @temporalio/worker (the native core), which a client has no use for and which costs start-up.
 */
import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { codecDataConverter } from '../codec';
import { activeTracing } from '../tracing';
import { UsageError, withFix } from './errors';

/** The connection flags as commander parses them (every command that talks to Temporal has them). */
export interface ConnectionFlags {
  address?: string;
  namespace?: string;
  profile?: string;
  configFile?: string;
  apiKey?: string;
  tls?: boolean;
  tlsCertPath?: string;
  tlsKeyPath?: string;
  tlsCaPath?: string;
  tlsServerName?: string;
}

/** Each flag and the envconfig variable it stands for: the flag is applied by setting it. */
const FLAG_ENV: Record<Exclude<keyof ConnectionFlags, 'tls'>, string> = {
  address: 'TEMPORAL_ADDRESS',
  namespace: 'TEMPORAL_NAMESPACE',
  profile: 'TEMPORAL_PROFILE',
  configFile: 'TEMPORAL_CONFIG_FILE',
  apiKey: 'TEMPORAL_API_KEY',
  tlsCertPath: 'TEMPORAL_TLS_CLIENT_CERT_PATH',
  tlsKeyPath: 'TEMPORAL_TLS_CLIENT_KEY_PATH',
  tlsCaPath: 'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
  tlsServerName: 'TEMPORAL_TLS_SERVER_NAME',
};

/** The TEMPORAL_* variables the given flags set (envconfig reads them as it reads the environment). */
export function connectionEnv(flags: ConnectionFlags): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [flag, name] of Object.entries(FLAG_ENV) as Array<[keyof typeof FLAG_ENV, string]>) {
    const value = flags[flag];
    if (value !== undefined) env[name] = value;
  }
  if (flags.tls) env.TEMPORAL_TLS = 'true';
  return env;
}

/**
 * For the worker and the agent, which connect through src/worker and src/agent: the flags go
 * into this process's environment, where envconfig finds them. A CLI process has one connection.
 */
export function applyConnectionFlags(flags: ConnectionFlags): void {
  Object.assign(process.env, connectionEnv(flags));
}

export interface Target {
  address: string;
  namespace: string;
  connectionOptions: ConnectionOptions;
}

/** Where the flags, the environment and the profile say Temporal is. */
export function resolveTarget(flags: ConnectionFlags): Target {
  let loaded: ReturnType<typeof loadClientConnectConfig>;
  try {
    loaded = loadClientConnectConfig({ overrideEnvVars: { ...stringEnv(), ...connectionEnv(flags) } });
  } catch (error) {
    throw new UsageError(
      withFix(
        `cannot read the Temporal client configuration: ${(error as Error).message}`,
        'check --config-file / TEMPORAL_CONFIG_FILE and --profile / TEMPORAL_PROFILE (temporal config list shows the profiles)',
      ),
    );
  }
  const { address = 'localhost:7233', tls, apiKey, metadata } = loaded.connectionOptions;
  return {
    address,
    namespace: loaded.namespace ?? 'default',
    // A client that cannot reach the server says so in seconds, not after the SDK's long default.
    connectionOptions: { address, tls, apiKey, metadata, connectTimeout: '5s' },
  };
}

function stringEnv(): Record<string, string> {
  return Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
}

/** Temporal did not answer: what was tried and how to point the CLI elsewhere. */
export class UnreachableError extends Error {
  override readonly name = 'UnreachableError';
}

/** Runs `work` with a client on a connection of its own, closed afterwards whatever happens. */
export async function withTemporal<T>(flags: ConnectionFlags, work: (client: Client, target: Target) => Promise<T>): Promise<T> {
  const target = resolveTarget(flags);
  let connection: Connection;
  try {
    connection = await Connection.connect(target.connectionOptions);
  } catch (error) {
    throw new UnreachableError(
      withFix(
        `cannot reach Temporal at ${target.address} (namespace ${target.namespace}): ${(error as Error).message}`,
        'start it (`npm start` runs a dev server on 127.0.0.1:7233), or point --address / TEMPORAL_ADDRESS or --profile at yours',
      ),
    );
  }
  try {
    // The payload codec when configured (DATUM_CODEC_KEYS): what the CLI reads and sends is decrypted and encrypted here.
    // Traced when OTEL_* turn tracing on: the command's span is the parent of what it starts (src/cli/tracing.ts).
    const interceptors = activeTracing()?.clientInterceptors;
    return await work(
      new Client({ connection, namespace: target.namespace, dataConverter: codecDataConverter(), interceptors }),
      target,
    );
  } finally {
    await connection.close();
  }
}
