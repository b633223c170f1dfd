/*
 * Trust anchors (docs/security.md "Trust anchors"): the host's agent.yaml lists the public keys
 * whose signatures it accepts for its desired state, and whether an
 * enforcing host acts only on signed intent. Signatures are OpenSSH's (`ssh-keygen -Y sign`, the
 * SSHSIG format git signs with), each for its own namespace, so a signature made for one purpose
 * never stands for another. What crosses the wire is here; the checks are the agent's
 * (src/agent/trust.ts) and the format's (src/trust/).
 */

/** The namespace (`ssh-keygen -Y sign -n …`) a desired-state file is signed for. */
export const DESIRED_NAMESPACE = 'datum-desired';
/** A desired-state file's detached signature sits next to it: desired/nodes/<node>.yaml.sig (where ssh-keygen -Y sign writes it). */
export const SIGNATURE_SUFFIX = '.sig';
/** An armored Ed25519 SSH signature is about 300 bytes; anything much larger is not one. */
export const MAX_SIGNATURE_BYTES = 4096;

/**
 * The exact bytes of a desired-state file (as UTF-8 text) and the detached signature over them,
 * carried unchanged from the authority with the bound intent to every apply: the agent verifies
 * these bytes, never a re-serialisation of them.
 */
export interface SignedIntent {
  document: string;
  signature: string;
}

/**
 * The namespace an operator signs a decision for (`ssh-keygen -Y sign -n datum-operator`): a
 * decision that widens what a host may write (a retake, an approved removal) is honoured by a host
 * that requires signatures only with such a signature by a key its agent.yaml lists in
 * trust.operators, over the canonical statement of exactly that decision (src/trust/statement.ts).
 */
export const OPERATOR_NAMESPACE = 'datum-operator';
/** How long a signed decision stands at most, from the host's clock: a short window, so it cannot be replayed later. */
export const DECISION_VALIDITY_MAX_MS = 60 * 60 * 1000;

/** An operator's signed decision as it travels with the decision: the statement's exact text and the signature over it. */
export interface OperatorSignature {
  statement: string;
  signature: string;
}

/**
 * Who made an operator decision, as the host established it: `proven` when the host checked an
 * operator signature (the key's fingerprint and comment), `declared` when the decision came with
 * only a name and a client identity, both the client's own claims.
 */
export type DecisionAuthor =
  { proof: 'proven'; by: string; key: string; key_comment: string } | { proof: 'declared'; by: string; identity: string | null };

/** Characters of a signed statement: a retake's is about 200; an approval's grows with its targets. */
export const MAX_STATEMENT_CHARS = 4096;

/**
 * What is wrong with the shape of an operator signature a payload carries (absent or null is
 * none), or null: the workflow carries it unopened, and only the host verifies it.
 */
export function operatorSignatureProblem(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) return 'must be {"statement": "…", "signature": "…"} or null';
  const { statement, signature, ...rest } = value as Record<string, unknown>;
  if (typeof statement !== 'string' || statement.length > MAX_STATEMENT_CHARS)
    return `statement must be the signed text, at most ${MAX_STATEMENT_CHARS} characters`;
  if (typeof signature !== 'string' || signature.length > MAX_SIGNATURE_BYTES)
    return `signature must be the armored SSH signature, at most ${MAX_SIGNATURE_BYTES} characters`;
  if (Object.keys(rest).length > 0) return `has unknown field(s) ${Object.keys(rest).join(', ')}`;
  return null;
}

export const OPERATOR_SIGNATURE_FIX = `sign with --sign-key <private key> (Datum signs the decision's statement with ssh-keygen -Y sign -n ${OPERATOR_NAMESPACE}), or leave it out`;
