/*
 * Trust anchors (docs/security.md "Trust anchors"): the host's agent.yaml lists the public keys
 * whose signatures it accepts, for desired state and for operators' decisions, and whether an
 * enforcing host acts only on signed intent. Signatures are OpenSSH's (`ssh-keygen -Y sign`, the
 * SSHSIG format git signs with), each for its own namespace, so a signature made for one purpose
 * never stands for another. What crosses the wire is here; the checks are the agent's
 * (src/agent/trust.ts) and the format's (src/trust/).
 */

/** The namespace (`ssh-keygen -Y sign -n …`) a desired-state file is signed for. */
export const DESIRED_NAMESPACE = 'datum-desired';
/** The namespace an operator's decision is signed for. */
export const DECISION_NAMESPACE = 'datum-decision';
/** A desired-state file's detached signature sits next to it: desired/nodes/<node>.yaml.sig (where ssh-keygen -Y sign writes it). */
export const SIGNATURE_SUFFIX = '.sig';
/** An armored Ed25519 SSH signature is about 300 bytes; anything much larger is not one. */
export const MAX_SIGNATURE_BYTES = 4096;
/** A decision statement is a few hundred bytes of JSON. */
export const MAX_STATEMENT_BYTES = 4096;

/**
 * The exact bytes of a desired-state file (as UTF-8 text) and the detached signature over them,
 * carried unchanged from the authority with the bound intent to every apply: the agent verifies
 * these bytes, never a re-serialisation of them.
 */
export interface SignedIntent {
  document: string;
  signature: string;
}

/** An operator's decision statement (JSON, DecisionStatement) and the signature over its exact bytes. */
export interface SignedDecision {
  statement: string;
  signature: string;
}

/** The statement format's name and version. */
export const DECISION_STATEMENT_VERSION = 'datum-decision/1';

/** What an operator's decision is about: what a statement signs, and what the loop asks the agent to check. */
export interface DecisionSubject {
  node: string;
  generation: number;
  /** A ResolutionKind (src/contract/work.ts). */
  resolution: string;
  resource_key: string | null;
  /** The work item it resolves; null for a resolveConflict. */
  item_id: string | null;
  /** grant only: how many more attempts. */
  attempts: number | null;
  by: string;
}

/**
 * What an operator signs to decide, and until when the signature counts (a short validity: a
 * signed decision cannot be replayed for long). Written by `datum resolve --sign-with` and
 * `datum work resolve --sign-with`; checked by the node's agent against what the loop is about to do.
 */
export interface DecisionStatement extends DecisionSubject {
  datum: typeof DECISION_STATEMENT_VERSION;
  signed_at: string;
  expires: string;
}

/** Resolutions that widen what a host may write: a trust-requiring host takes them only signed by an operator key. */
export const WIDENING_RESOLUTIONS = ['retake', 'grant', 'adopt', 'rebind'] as const;

export function widens(resolution: string): boolean {
  return (WIDENING_RESOLUTIONS as readonly string[]).includes(resolution);
}

/**
 * Who decided, as the ledger records it: `proven` when the node's agent checked an operator
 * key's signature over the decision (its fingerprint is `key`), else `declared`: a name and a
 * client identity, both the client's own claims.
 */
export interface DecisionAuthor {
  by: string;
  proof: 'signature' | 'declared';
  /** The operator key that signed (SHA256:… as ssh-keygen -l prints it), and its comment; null when declared. */
  key: string | null;
  key_comment: string | null;
  /** The node whose agent checked the signature; null when declared. */
  checked_by: string | null;
  /** Why it is only declared (the host does not require signatures, or did not answer). */
  detail: string;
}

/** What the loop asks the node's agent about an operator's decision before it takes it. */
export interface VerifyDecisionRequest extends DecisionSubject {
  signed: SignedDecision | null;
}
