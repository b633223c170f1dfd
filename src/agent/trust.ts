import { InvalidInputError, msBetween, notPlanned, type AuthorizedAction, type DesiredState } from '../domain';
import { DESIRED_NAMESPACE, type SignedIntent } from '../contract';
import { parseDesiredStateText } from '../schemas/documents';
import type { AgentConfig } from '../schemas';
import { SignatureProblem, parsePublicKey, verifySignature, type PublicKey } from '../trust/sshsig';
import type { Refusal } from './activities/refusals';

/*
 * The host's trust anchors (agent.yaml `trust`, docs/security.md "Trust anchors"): on a host that
 * requires them, an apply is carried out only when it brings the exact bytes of its desired-state
 * document and a signature over them by a key the host lists, the document is for this node and
 * the action's generation and has not expired, and the action is one the document's own plan
 * yields (src/domain/intended.ts). A namespace credential alone then cannot make the host act: it
 * can replay what a signer signed, which the fence and the journal already answer, and no more.
 */

/** Keys are read once per distinct line: an apply checks against them without parsing them again. */
const parsed = new Map<string, PublicKey>();

export function trustedKeys(lines: readonly string[]): PublicKey[] {
  return lines.map((line) => {
    let key = parsed.get(line);
    if (!key) {
      key = parsePublicKey(line);
      if (parsed.size > 256) parsed.clear();
      parsed.set(line, key);
    }
    return key;
  });
}

/** How to sign a node's desired state, for the fixes below. */
export const signFix = (node: string) =>
  `the desired-state author signs desired/nodes/${node}.yaml with a key trust.desired lists (datum sign desired/nodes/${node}.yaml --key <private key>, or ssh-keygen -Y sign -n ${DESIRED_NAMESPACE} -f <private key> desired/nodes/${node}.yaml), then datum refresh ${node}`;

type Check = 'unsigned' | SignatureProblem['check'] | 'document' | 'expired' | 'not planned';

const untrusted = (check: Check, problem: string, fix: string, signer: PublicKey | null = null): Refusal => ({
  type: check === 'expired' ? 'ExpiredIntent' : 'UntrustedIntent',
  problem,
  fix,
  facts: { check, signer: signer?.fingerprint ?? null, signer_comment: signer?.comment ?? null },
});

/** The signed document an apply carries, as far as it has the shape of one. */
function envelopeOf(signed: unknown): SignedIntent | null {
  if (signed === null || typeof signed !== 'object') return null;
  const { document, signature } = signed as Partial<SignedIntent>;
  return typeof document === 'string' && typeof signature === 'string' ? { document, signature } : null;
}

/**
 * Step 2b of apply: why this host does not act on `action` as signed intent, or null when it may.
 * A host that neither requires signatures nor lists a key for desired state acts as before; one
 * that lists keys checks any signature it is sent, required or not.
 */
export function untrustedIntent(config: AgentConfig, signed: unknown, action: AuthorizedAction, now: Date): Refusal | null {
  const { trust } = config;
  const envelope = envelopeOf(signed);
  if (envelope === null) {
    if (!trust.require) return null;
    return untrusted(
      'unsigned',
      `this host acts only on signed desired state (trust.require in its agent.yaml), and the apply carries ${signed === undefined || signed === null ? 'no signature' : 'no document and signature it can read'}`,
      signFix(config.node),
    );
  }
  if (!trust.require && trust.desired.length === 0) return null;
  let signer: PublicKey;
  try {
    signer = verifySignature(
      Buffer.from(envelope.document, 'utf8'),
      envelope.signature,
      DESIRED_NAMESPACE,
      trustedKeys(trust.desired),
      'trust.desired',
    );
  } catch (error) {
    if (!(error instanceof SignatureProblem)) throw error;
    return untrusted(
      error.check,
      `the desired state it carries is not signed as this host requires: ${error.problem}`,
      error.fix,
    );
  }
  let document: DesiredState;
  try {
    document = parseDesiredStateText(envelope.document, 'the signed document', {
      revision: signer.fingerprint,
      author: null,
      loaded_at: now.toISOString(),
    });
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    return untrusted('document', `the signed document does not validate: ${error.message}`, signFix(config.node), signer);
  }
  return documentRefusal(document, config.node, action, now, signer);
}

/** The signed document's own limits: its expiry, then whether it plans this very action. */
function documentRefusal(
  document: DesiredState,
  node: string,
  action: AuthorizedAction,
  now: Date,
  signer: PublicKey,
): Refusal | null {
  if (document.expires !== undefined && msBetween(document.expires, now.toISOString()) > 0)
    return untrusted(
      'expired',
      `the signed desired state of generation ${document.generation} expired at ${document.expires} (signed by ${signer.fingerprint}); past its expiry this host does not act on it`,
      `the desired-state author signs it again with a later expires: (datum sign desired/nodes/${node}.yaml), then datum refresh ${node}`,
      signer,
    );
  const why = notPlanned(document, node, action);
  if (why === null) return null;
  return untrusted(
    'not planned',
    `the action is not one the signed desired state (signed by ${signer.fingerprint}) plans: ${why}`,
    `nothing to fix on the host: a forged or misrouted apply is not carried out; if the loop sent it, datum refresh ${node} re-binds it to the signed file`,
    signer,
  );
}
