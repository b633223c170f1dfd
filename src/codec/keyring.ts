import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { withFix } from '../contract/fix';

/*
 * The payload codec's keys: a keyring of AES-256 keys by id, and the id new payloads are
 * encrypted with. Rotation is adding a key, making it active, and keeping the old one for as
 * long as any history still holds payloads it encrypted: a payload names its key id, so the
 * keyring decodes old and new alike.
 *
 *   DATUM_CODEC_KEYS    a JSON file {"<key id>": "<base64 of 32 bytes>", …}, or a directory of
 *                       files named by key id holding the base64 key (a mounted Kubernetes
 *                       Secret: its `..data` entries are skipped). Unset: no codec, payloads in clear.
 *   DATUM_CODEC_KEY_ID  the key id new payloads are encrypted with; needed when the keyring
 *                       holds more than one key.
 */

export const CODEC_KEYS_ENV = 'DATUM_CODEC_KEYS';
export const CODEC_KEY_ID_ENV = 'DATUM_CODEC_KEY_ID';

/** A key id: short, printable, safe in metadata, logs and file names. */
const KEY_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const KEY_BYTES = 32;

export interface Keyring {
  /** Where the keys were read from, for messages. */
  readonly source: string;
  /** The id new payloads are encrypted with. */
  readonly activeKeyId: string;
  readonly keys: ReadonlyMap<string, Buffer>;
}

/** The codec's configuration is unusable: the message names what and how to fix it. */
export class CodecConfigError extends Error {
  override readonly name = 'CodecConfigError';
}

/**
 * Whether this process's configuration switches the codec on. Cheap (no file read): a process
 * whose keyring is unusable never got as far as connecting (codecDataConverter throws).
 */
export function codecConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env[CODEC_KEYS_ENV]?.trim());
}

/** The keyring named by DATUM_CODEC_KEYS and DATUM_CODEC_KEY_ID, or null when the codec is off. */
export function keyringFromEnv(env: NodeJS.ProcessEnv = process.env): Keyring | null {
  const source = env[CODEC_KEYS_ENV]?.trim();
  if (!source) {
    if (env[CODEC_KEY_ID_ENV]?.trim())
      throw new CodecConfigError(
        withFix(
          `${CODEC_KEY_ID_ENV} is set but ${CODEC_KEYS_ENV} is not, so there is no key to encrypt with`,
          `set ${CODEC_KEYS_ENV} to the keyring (a JSON file of key id -> base64 key, or a directory of key files), or unset ${CODEC_KEY_ID_ENV}`,
        ),
      );
    return null;
  }
  return loadKeyring(source, env[CODEC_KEY_ID_ENV]?.trim() || undefined);
}

/** Reads and checks a keyring: every key 32 bytes of base64, the active id among them. */
export function loadKeyring(source: string, activeKeyId?: string): Keyring {
  const file = path.resolve(source);
  const raw = readRawKeys(file);
  const keys = new Map<string, Buffer>();
  for (const [id, value] of raw) keys.set(id, parseKey(file, id, value));
  if (keys.size === 0)
    throw new CodecConfigError(
      withFix(
        `the codec keyring ${file} holds no keys`,
        'add one: `openssl rand -base64 32` gives a key (docs/security.md, "Encrypted payloads")',
      ),
    );
  return { source: file, activeKeyId: chooseActive(file, keys, activeKeyId), keys };
}

function readRawKeys(file: string): Array<[string, string]> {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(file).isDirectory();
  } catch (error) {
    throw new CodecConfigError(
      withFix(
        `cannot read the codec keyring ${file} (${CODEC_KEYS_ENV}): ${(error as Error).message}`,
        `point ${CODEC_KEYS_ENV} at the keyring file or directory this process can read`,
      ),
    );
  }
  return isDirectory ? readKeyDirectory(file) : readKeyFile(file);
}

/** A directory: one file per key, named by its id (a `.key` suffix is dropped), dot-files skipped. */
function readKeyDirectory(dir: string): Array<[string, string]> {
  const entries: Array<[string, string]> = [];
  for (const name of readdirSync(dir).sort()) {
    if (name.startsWith('.')) continue;
    const full = path.join(dir, name);
    if (!statSync(full).isFile()) continue;
    entries.push([name.replace(/\.key$/, ''), readFileSync(full, 'utf8').trim()]);
  }
  return entries;
}

function readKeyFile(file: string): Array<[string, string]> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new CodecConfigError(
      withFix(
        `the codec keyring ${file} is not JSON: ${(error as Error).message}`,
        'write it as {"<key id>": "<base64 of 32 random bytes>"}, or point DATUM_CODEC_KEYS at a directory of key files',
      ),
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new CodecConfigError(
      withFix(`the codec keyring ${file} is not a JSON object`, 'write it as {"<key id>": "<base64 of 32 random bytes>"}'),
    );
  return Object.entries(parsed).map(([id, value]) => {
    if (typeof value !== 'string')
      throw new CodecConfigError(
        withFix(`the codec keyring ${file}: key "${id}" is not a string`, 'give each key id the base64 text of a 32-byte key'),
      );
    return [id, value.trim()];
  });
}

function parseKey(file: string, id: string, value: string): Buffer {
  if (!KEY_ID.test(id))
    throw new CodecConfigError(
      withFix(
        `the codec keyring ${file}: "${id}" is not a usable key id`,
        'name keys with letters, digits, ".", "_" or "-" (at most 64), e.g. "2026-05"',
      ),
    );
  const key = /^[A-Za-z0-9+/]+={0,2}$/.test(value) ? Buffer.from(value, 'base64') : Buffer.alloc(0);
  if (key.length !== KEY_BYTES)
    throw new CodecConfigError(
      withFix(
        `the codec keyring ${file}: key "${id}" is not the base64 of ${KEY_BYTES} bytes (AES-256)`,
        `replace it with a fresh key: \`openssl rand -base64 ${KEY_BYTES}\``,
      ),
    );
  return key;
}

function chooseActive(file: string, keys: ReadonlyMap<string, Buffer>, wanted: string | undefined): string {
  const ids = [...keys.keys()];
  if (wanted === undefined) {
    if (ids.length === 1) return ids[0];
    throw new CodecConfigError(
      withFix(
        `the codec keyring ${file} holds ${ids.length} keys (${ids.join(', ')}) and ${CODEC_KEY_ID_ENV} does not say which encrypts`,
        `set ${CODEC_KEY_ID_ENV} to the newest key id every process already has`,
      ),
    );
  }
  if (!keys.has(wanted))
    throw new CodecConfigError(
      withFix(
        `${CODEC_KEY_ID_ENV} names key "${wanted}", which the codec keyring ${file} does not hold (it holds ${ids.join(', ')})`,
        `add key "${wanted}" to the keyring, or set ${CODEC_KEY_ID_ENV} to one it holds`,
      ),
    );
  return wanted;
}
