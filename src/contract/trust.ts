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
