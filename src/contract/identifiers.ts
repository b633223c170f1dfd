/*
 * The primitive identifiers every part of Datum names things by: node names, resource keys,
 * digests. Here, not in src/domain, because signal payloads and workflow ids are built from them
 * and the contract is a leaf; src/domain re-exports them for its own schemas.
 */
import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils';
import { z } from 'zod';
import { withFix } from './fix';

const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const RESOURCE_KEY = /^[A-Za-z][A-Za-z0-9_-]{0,62}$/;
/** A desired_digest: `sha256:` and the hex sha256 of the canonical desired state. */
export const DESIRED_DIGEST = /^sha256:[a-f0-9]{64}$/;

export const nodeId = z
  .string({ error: withFix('must be a node name', 'give the node a name like "N-24"') })
  .regex(
    NODE_ID,
    withFix(
      'is not a valid node name',
      'use letters, digits, ".", "_" or "-", starting with a letter or digit (at most 63 characters)',
    ),
  );

export const resourceKey = z
  .string()
  .regex(
    RESOURCE_KEY,
    withFix('is not a valid resource key', 'start with a letter and use letters, digits, "_" or "-" (at most 63 characters)'),
  );

/** Hex sha256 of a UTF-8 string. Pure JS, so it runs inside the workflow sandbox. */
export function sha256Hex(text: string): string {
  return bytesToHex(sha256(utf8ToBytes(text)));
}
