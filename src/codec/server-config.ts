import { readFileSync } from 'node:fs';
import { withFix } from '../contract/fix';
import { CODEC_KEYS_ENV, CodecConfigError, keyringFromEnv } from './keyring';
import type { CodecServerOptions } from './server';

/*
 * The codec server's configuration from the environment (what `datum codec-server` reads):
 *
 *   DATUM_CODEC_KEYS, DATUM_CODEC_KEY_ID   the keyring, as for every other process
 *   DATUM_CODEC_SERVER_TOKEN               the bearer token a caller must send, or
 *   DATUM_CODEC_SERVER_TOKEN_FILE          a file of tokens, one a line (rotate by adding one)
 *   DATUM_CODEC_SERVER_ADDRESS             host:port to listen on (default 127.0.0.1:8888)
 *   DATUM_CODEC_SERVER_ORIGINS             Web UI origins, comma-separated
 *                                          (default http://localhost:8233,http://127.0.0.1:8233)
 *   DATUM_CODEC_SERVER_NAMESPACES          namespaces served, comma-separated (default: any)
 */

export const DEFAULT_UI_ORIGINS = ['http://localhost:8233', 'http://127.0.0.1:8233'];

const list = (value: string | undefined): string[] | undefined => {
  const items = (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return items.length > 0 ? items : undefined;
};

function tokensFrom(env: NodeJS.ProcessEnv): string[] {
  const file = env.DATUM_CODEC_SERVER_TOKEN_FILE?.trim();
  const tokens = env.DATUM_CODEC_SERVER_TOKEN?.trim() ? [env.DATUM_CODEC_SERVER_TOKEN.trim()] : [];
  if (!file) return tokens;
  try {
    return [...tokens, ...readFileSync(file, 'utf8').split('\n')].map((t) => t.trim()).filter(Boolean);
  } catch (error) {
    throw new CodecConfigError(
      withFix(
        `cannot read DATUM_CODEC_SERVER_TOKEN_FILE ${file}: ${(error as Error).message}`,
        'point it at a file of bearer tokens, one a line',
      ),
    );
  }
}

function addressFrom(value: string | undefined): { host: string; port: number } {
  if (!value?.trim()) return { host: '127.0.0.1', port: 8888 };
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value.trim());
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535)
    throw new CodecConfigError(
      withFix(`DATUM_CODEC_SERVER_ADDRESS "${value}" is not host:port`, 'write it like 127.0.0.1:8888 or 0.0.0.0:8888'),
    );
  return { host: match[1] ?? (match[2] || '127.0.0.1'), port };
}

/** Everything runCodecServer needs but a logger, from the environment; a missing keyring is an error. */
export function codecServerOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): CodecServerOptions {
  const keyring = keyringFromEnv(env);
  if (!keyring)
    throw new CodecConfigError(
      withFix(
        `the codec server needs the keyring and ${CODEC_KEYS_ENV} is unset`,
        `set ${CODEC_KEYS_ENV} to the keyring every worker and agent uses`,
      ),
    );
  const namespaces = list(env.DATUM_CODEC_SERVER_NAMESPACES);
  return {
    keyring,
    tokens: tokensFrom(env),
    ...addressFrom(env.DATUM_CODEC_SERVER_ADDRESS),
    allowedOrigins: list(env.DATUM_CODEC_SERVER_ORIGINS) ?? DEFAULT_UI_ORIGINS,
    ...(namespaces ? { namespaces } : {}),
  };
}
