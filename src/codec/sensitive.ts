import type { AuthorityRead } from '../contract';
import { withFix } from '../contract/fix';
import { CODEC_KEYS_ENV, codecConfigured } from './keyring';

/*
 * A file marked `sensitive: true` is never decodable without the key. The ledger keeps only its
 * digest and size (src/domain/redact.ts), but its content reaches the node as the apply's input,
 * and the desired state itself is the authority read's result: both are workflow history. So a
 * controller that writes history in clear refuses desired state with a sensitive file before
 * its content enters history at all; the loop shows BLOCKED INVALID_DESIRED_STATE with this
 * message, and acts once the controller runs with the codec.
 */

/**
 * The guard for a controller's authority reads, fixed when the controller starts: whether its
 * worker encrypts is decided by the configuration it started with (codecDataConverter).
 */
export function sensitiveGuard(encrypted: boolean = codecConfigured()): (read: AuthorityRead) => AuthorityRead {
  return (read) => refuseSensitiveInClear(read, encrypted);
}

/** The read unchanged, or refused when it holds sensitive content and payloads are not encrypted. */
export function refuseSensitiveInClear(read: AuthorityRead, encrypted: boolean): AuthorityRead {
  if (!read.ok || encrypted) return read;
  const keys = Object.entries(read.intent.resources)
    .filter(([, spec]) => spec.type === 'file' && spec.sensitive === true)
    .map(([key]) => key);
  if (keys.length === 0) return read;
  const source = read.intent.provenance.source;
  return {
    ok: false,
    kind: 'invalid',
    error: withFix(
      `${source}: ${keys.map((k) => `resources.${k}`).join(', ')} ${keys.length === 1 ? 'is' : 'are'} marked sensitive: true, but this controller worker has no payload codec (${CODEC_KEYS_ENV} is unset), so the content would be stored in clear in workflow history; nothing from this file was applied`,
      `run every worker, agent and client with the payload codec (docs/security.md, "Encrypted payloads"), or drop sensitive: true`,
    ),
  };
}
