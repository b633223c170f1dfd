import type { DataConverter } from '@temporalio/common';
import { AesGcmCodec } from './aes-gcm';
import { keyringFromEnv, type Keyring } from './keyring';

/*
 * Datum's payload codec, for every client, worker and agent: off unless DATUM_CODEC_KEYS names a
 * keyring (src/codec/keyring.ts), then AES-256-GCM on every payload the process writes (workflow
 * and activity inputs and results, local-activity markers, signals, queries, heartbeats, memos).
 * The codec runs outside the workflow sandbox, so the workflow bundle is the same either way.
 * Search attributes are never encrypted (the server indexes them): Datum's hold node names,
 * generations, digests and statuses, never desired content.
 */

export { AesGcmCodec, PayloadDecryptionError, ENCRYPTED_ENCODING, KEY_ID_METADATA } from './aes-gcm';
export { CodecConfigError, loadKeyring, type Keyring } from './keyring';

/** The data converter for a keyring: the SDK's payload converter, then encryption. */
export function dataConverterFor(keyring: Keyring): DataConverter {
  return { payloadCodecs: [new AesGcmCodec(keyring)] };
}

/**
 * The data converter this process's configuration asks for: undefined (the SDK's default) when
 * DATUM_CODEC_KEYS is unset. An unreadable or invalid keyring throws CodecConfigError, so a
 * process that was meant to encrypt never starts writing in clear.
 */
export function codecDataConverter(env: NodeJS.ProcessEnv = process.env): DataConverter | undefined {
  const keyring = keyringFromEnv(env);
  return keyring ? dataConverterFor(keyring) : undefined;
}
