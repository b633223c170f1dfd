import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { METADATA_ENCODING_KEY, type Payload, type PayloadCodec } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { withFix } from '../contract/fix';
import { CODEC_KEYS_ENV, type Keyring } from './keyring';

/*
 * AES-256-GCM over whole payloads, the convention of Temporal's encryption samples: the plain
 * payload (its metadata and data, protobuf-encoded) is the plaintext, and the stored payload is
 * `binary/encrypted` with the key id, cipher and nonce in its metadata. A fresh 96-bit nonce per
 * payload; the key id and cipher are authenticated data, so a payload whose metadata is edited to
 * name another key fails authentication instead of decoding under it.
 */

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';
export const CIPHER_METADATA = 'encryption-cipher';
export const NONCE_METADATA = 'encryption-nonce';
export const CIPHER = 'AES-256-GCM';

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** An encrypted payload this process must not decode: the message names the key id and the fix. */
export class PayloadDecryptionError extends Error {
  override readonly name = 'PayloadDecryptionError';
  constructor(
    message: string,
    /** The key id the payload names, or null when it names none. */
    readonly keyId: string | null,
  ) {
    super(message);
  }
}

const text = (bytes: Uint8Array | null | undefined): string | undefined =>
  bytes ? Buffer.from(bytes).toString('utf8') : undefined;

const additionalData = (keyId: string): Buffer => Buffer.from(`datum-codec/v1\0${CIPHER}\0${keyId}`, 'utf8');

export class AesGcmCodec implements PayloadCodec {
  constructor(private readonly keyring: Keyring) {}

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.resolve(payloads.map((p) => this.encrypt(p)));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.resolve(payloads.map((p) => this.decrypt(p)));
  }

  encrypt(payload: Payload): Payload {
    const keyId = this.keyring.activeKeyId;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.keyring.keys.get(keyId)!, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(additionalData(keyId));
    const plain = temporal.api.common.v1.Payload.encode(payload).finish();
    const data = Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    return {
      metadata: {
        [METADATA_ENCODING_KEY]: Buffer.from(ENCRYPTED_ENCODING),
        [KEY_ID_METADATA]: Buffer.from(keyId),
        [CIPHER_METADATA]: Buffer.from(CIPHER),
        [NONCE_METADATA]: nonce,
      },
      data,
    };
  }

  /**
   * A payload that is not `binary/encrypted` passes unchanged: it was written in clear (before the
   * codec was switched on, or by a plain `temporal workflow start`). An encrypted one decodes
   * only under the key it names and only if it authenticates; anything else is refused.
   */
  decrypt(payload: Payload): Payload {
    const metadata = payload.metadata ?? {};
    if (text(metadata[METADATA_ENCODING_KEY]) !== ENCRYPTED_ENCODING) return payload;
    const keyId = text(metadata[KEY_ID_METADATA]) ?? null;
    const key = keyId === null ? undefined : this.keyring.keys.get(keyId);
    if (keyId === null || key === undefined) throw this.unknownKey(keyId);
    const cipherName = text(metadata[CIPHER_METADATA]);
    const nonce = metadata[NONCE_METADATA];
    const data = Buffer.from(payload.data ?? new Uint8Array());
    if (cipherName !== CIPHER || nonce?.length !== NONCE_BYTES || data.length < TAG_BYTES)
      throw new PayloadDecryptionError(
        withFix(
          `refused a payload encrypted with key "${keyId}": its cipher is ${cipherName ?? 'not named'} with a ${nonce?.length ?? 0}-byte nonce, where Datum writes ${CIPHER} with ${NONCE_BYTES}; nothing was decoded`,
          'it was not written by Datum’s codec: find the client that wrote it',
        ),
        keyId,
      );
    return this.open(key, keyId, Buffer.from(nonce), data);
  }

  private open(key: Buffer, keyId: string, nonce: Buffer, data: Buffer): Payload {
    const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(additionalData(keyId));
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    let plain: Buffer;
    try {
      plain = Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new PayloadDecryptionError(
        withFix(
          `refused a payload encrypted with key "${keyId}": it does not authenticate under the key "${keyId}" in ${this.keyring.source}, so that key is not the one it was encrypted with (or the payload was altered); nothing was decoded`,
          `give this process the same key "${keyId}" as the process that wrote it (${CODEC_KEYS_ENV})`,
        ),
        keyId,
      );
    }
    return temporal.api.common.v1.Payload.decode(plain);
  }

  private unknownKey(keyId: string | null): PayloadDecryptionError {
    const held = [...this.keyring.keys.keys()].join(', ');
    return new PayloadDecryptionError(
      keyId === null
        ? withFix(
            'refused an encrypted payload that names no key id; nothing was decoded',
            'it was not written by Datum’s codec: find the client that wrote it',
          )
        : withFix(
            `refused a payload encrypted with key "${keyId}", which the codec keyring ${this.keyring.source} does not hold (it holds ${held}); nothing was decoded`,
            `add key "${keyId}" back to ${CODEC_KEYS_ENV}: a key stays in every keyring as long as any history holds payloads it encrypted`,
          ),
      keyId,
    );
  }
}
