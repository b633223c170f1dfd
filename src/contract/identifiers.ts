/*
 * The primitive identifiers every part of Datum names things by: node names, resource keys,
 * digests. Here, not in src/domain, because signal payloads and workflow ids are built from them
 * and the contract is a leaf. Each comes with its check, for the workflow sandbox and the CLI, and
 * its wording; the zod schemas of the edges (src/schemas/base.ts) are built from both.
 */
import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils';
import { withFix } from './fix';

export const NODE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
export const RESOURCE_KEY = /^[A-Za-z][A-Za-z0-9_-]{0,62}$/;
/** A desired_digest: `sha256:` and the hex sha256 of the canonical desired state. */
export const DESIRED_DIGEST = /^sha256:[a-f0-9]{64}$/;

/** What is wrong with a value that should be a node name: not text, or not a usable name. */
export const NODE_ID_RULES = {
  type: { problem: 'must be a node name', fix: 'give the node a name like "N-24"' },
  pattern: {
    problem: 'is not a valid node name',
    fix: 'use letters, digits, ".", "_" or "-", starting with a letter or digit (at most 63 characters)',
  },
} as const;

/** What is wrong with a resource key that does not match RESOURCE_KEY. */
export const RESOURCE_KEY_RULE = {
  problem: 'is not a valid resource key',
  fix: 'start with a letter and use letters, digits, "_" or "-" (at most 63 characters)',
} as const;

/** A rule's "<problem> — fix: <fix>" message, as the schemas write it. */
export const ruleMessage = (rule: { problem: string; fix: string }): string => withFix(rule.problem, rule.fix);

export const isNodeId = (value: unknown): boolean => typeof value === 'string' && NODE_ID.test(value);
export const isResourceKey = (value: unknown): boolean => typeof value === 'string' && RESOURCE_KEY.test(value);

/** Hex sha256 of a UTF-8 string. Pure JS, so it runs inside the workflow sandbox. */
export function sha256Hex(text: string): string {
  return bytesToHex(sha256(utf8ToBytes(text)));
}

/** One loop per (node, generation): starting it twice attaches instead (a name of the contract, src/contract/names.ts). */
export const reconcileWorkflowId = (node: string, generation: number) => `datum/${node}/gen-${generation}`;
