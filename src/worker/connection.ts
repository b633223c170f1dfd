import { Client, Connection } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { NativeConnection } from '@temporalio/worker';
import { codecDataConverter } from '../codec';
import { ensureRuntime } from './metrics';
import { activeTracing } from '../tracing';

export interface TemporalTarget {
  /** host:port; overrides the profile and TEMPORAL_ADDRESS. */
  address?: string;
  namespace?: string;
}

/**
 * Where Temporal is, from envconfig: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
 * TEMPORAL_TLS_*, TEMPORAL_PROFILE and the config file (temporal.toml). An explicit address or
 * namespace (a CLI flag) wins over all of them.
 */
export function connectConfig(target: TemporalTarget = {}) {
  const loaded = loadClientConnectConfig();
  const connectionOptions = { ...loaded.connectionOptions, ...(target.address ? { address: target.address } : {}) };
  if (!connectionOptions.address) connectionOptions.address = 'localhost:7233';
  return { connectionOptions, namespace: target.namespace ?? loaded.namespace ?? 'default' };
}

export async function connectClient(
  target: TemporalTarget = {},
): Promise<{ client: Client; connection: Connection; namespace: string; address: string }> {
  const { connectionOptions, namespace } = connectConfig(target);
  const connection = await Connection.connect(connectionOptions);
  // The payload codec, when configured (DATUM_CODEC_KEYS): what this client writes is encrypted.
  // Traced, when the process traces: a rollout activity's span is the parent of the loops it starts.
  const interceptors = activeTracing()?.clientInterceptors;
  const client = new Client({ connection, namespace, dataConverter: codecDataConverter(), interceptors });
  return { client, connection, namespace, address: connectionOptions.address! };
}

export async function connectWorker(
  target: TemporalTarget = {},
): Promise<{ connection: NativeConnection; namespace: string; address: string }> {
  const { connectionOptions, namespace } = connectConfig(target);
  // The first native connection creates the process's SDK runtime: metrics must be set up first.
  ensureRuntime();
  const connection = await NativeConnection.connect(connectionOptions);
  return { connection, namespace, address: connectionOptions.address! };
}
