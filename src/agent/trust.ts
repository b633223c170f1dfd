import { InvalidInputError, msBetween, notPlanned, type AuthorizedAction, type DesiredState, type Json } from '../domain';
import {
  DECISION_VALIDITY_MAX_MS,
  DESIRED_NAMESPACE,
  OPERATOR_NAMESPACE,
  type DecisionAuthor,
  type OperatorSignature,
  type SignedIntent,
} from '../contract';
import { parseDesiredStateText } from '../schemas/documents';
import type { AgentConfig } from '../schemas';
import { SignatureProblem, parsePublicKey, verifySignature, type PublicKey } from '../trust/sshsig';
import { otherDecision, parseStatement, type DecisionStatement } from '../trust/statement';
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

/** The key among `lines` whose signature over `text` for `namespace` this is, or the check that failed. */
function signerOf(
  text: string,
  signature: string,
  namespace: string,
  lines: readonly string[],
  whose: string,
): PublicKey | SignatureProblem {
  try {
    return verifySignature(Buffer.from(text, 'utf8'), signature, namespace, trustedKeys(lines), whose);
  } catch (error) {
    if (!(error instanceof SignatureProblem)) throw error;
    return error;
  }
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
  const signer = signerOf(envelope.document, envelope.signature, DESIRED_NAMESPACE, trust.desired, 'trust.desired');
  if (signer instanceof SignatureProblem)
    return untrusted(
      signer.check,
      `the desired state it carries is not signed as this host requires: ${signer.problem}`,
      signer.fix,
    );
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

// ---------------------------------------------------------------------------------------------
// Operator decisions that widen what the host may write (a retake, an approved removal): on a
// host that requires signatures, honoured only when signed by a key trust.operators lists, over
// the statement of exactly this decision, before its expiry (docs/security.md, "Operator signatures").

/** How an operator signs `wanted`, for the fixes below. */
export function decisionSignFix(wanted: Omit<DecisionStatement, 'expires'>): string {
  const command =
    wanted.decision === 'approve'
      ? `datum work resolve ${wanted.subject} --resolution approve --by ${wanted.by} --sign-key <private key>`
      : `datum work resolve <item> --resolution retake --by ${wanted.by} --sign-key <private key> (or datum resolve ${wanted.node} ${wanted.subject} --resolution retake --sign-key <private key>)`;
  return `an operator whose public key trust.operators in ${wanted.node}'s agent.yaml lists decides again with a signature: ${command}, which signs the decision's statement with ssh-keygen -Y sign -n ${OPERATOR_NAMESPACE}`;
}

const decisionName = (wanted: Omit<DecisionStatement, 'expires'>) =>
  wanted.decision === 'approve' ? `the approval of ${wanted.subject}` : `a retake of "${wanted.subject}"`;

const untrustedDecision = (problem: string, fix: string, facts: Record<string, Json> = {}): { refusal: Refusal } => ({
  refusal: { type: 'UntrustedDecision', problem, fix, facts },
});

/** The signature a decision carries, as far as it has the shape of one. */
function signatureOf(signed: unknown): OperatorSignature | null {
  if (signed === null || typeof signed !== 'object') return null;
  const { statement, signature } = signed as Partial<OperatorSignature>;
  return typeof statement === 'string' && typeof signature === 'string' ? { statement, signature } : null;
}

/**
 * Who made the decision `wanted`, as this host can establish it: proven by an operator key it
 * lists, or declared only (where the host does not require signatures); or why it refuses it.
 */
export function decisionAuthor(
  config: AgentConfig,
  wanted: Omit<DecisionStatement, 'expires'>,
  signed: unknown,
  identity: string | null,
  now: Date,
): { author: DecisionAuthor } | { refusal: Refusal } {
  const { trust } = config;
  const envelope = signatureOf(signed);
  const declared = { author: { proof: 'declared' as const, by: wanted.by, identity } };
  if (envelope === null) {
    if (!trust.require) return declared;
    return untrustedDecision(
      `this host honours ${decisionName(wanted)} only when an operator signed it (trust.require in its agent.yaml), and the decision carries ${signed === undefined || signed === null ? 'no signature' : 'no statement and signature it can read'}`,
      decisionSignFix(wanted),
      { check: 'unsigned' },
    );
  }
  if (!trust.require && trust.operators.length === 0) return declared;
  const signer = signerOf(envelope.statement, envelope.signature, OPERATOR_NAMESPACE, trust.operators, 'trust.operators');
  if (signer instanceof SignatureProblem)
    return untrustedDecision(`${decisionName(wanted)} is not signed as this host requires: ${signer.problem}`, signer.fix, {
      check: signer.check,
    });
  const problem = statementProblem(envelope.statement, wanted, now);
  if (problem)
    return untrustedDecision(
      `the statement signed by ${signer.fingerprint} does not stand for ${decisionName(wanted)}: ${problem}`,
      decisionSignFix(wanted),
      {
        check: 'statement',
        signer: signer.fingerprint,
      },
    );
  return { author: { proof: 'proven', by: wanted.by, key: signer.fingerprint, key_comment: signer.comment } };
}

/** Why a verified statement does not stand for `wanted` now: another decision, or outside its window. */
function statementProblem(text: string, wanted: Omit<DecisionStatement, 'expires'>, now: Date): string | null {
  const signed = parseStatement(text);
  if ('problem' in signed) return signed.problem;
  const other = otherDecision(signed, wanted);
  if (other) return other;
  const expires = Date.parse(signed.expires);
  if (Number.isNaN(expires)) return `its expiry "${signed.expires}" is not a time`;
  if (expires <= now.getTime()) return `it expired at ${signed.expires}`;
  if (expires - now.getTime() > DECISION_VALIDITY_MAX_MS)
    return `it stands until ${signed.expires}, more than ${DECISION_VALIDITY_MAX_MS / 60_000} minutes ahead, and a signed decision stands for a short while only`;
  return null;
}
