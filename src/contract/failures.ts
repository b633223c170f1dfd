/*
 * Failure types: each is the `type` of a non-retryable ApplicationFailure, listed in
 * `nonRetryableErrorTypes` where retrying cannot help.
 */

/**
 * Failure types of the agent's refusals. Each is a non-retryable ApplicationFailure: retrying
 * cannot make an observe-mode host enforce, or a wrong artifact verify.
 */
export const REFUSALS = [
  'ObserveModeRefusal',
  'OperatorOwnedRefusal',
  'DestructiveActionRefusal',
  'ArtifactDigestMismatch',
  'StaleGenerationRefusal',
  'PathOutsideRoot',
  'NodeMismatch',
  'ArtifactUnavailable',
  'InvalidAgentConfig',
  'InvalidAction',
  // An open conflict with another writer is recorded on the node for this very value of the target
  // (<root>/.datum/decisions.json): only an operator's retake, or a new value, lets Datum write it.
  'ConflictOpenRefusal',
  // The snapshot the action was planned from is older than its observation_ttl at the moment of
  // the write: not a standing "no", the loop takes a fresh snapshot and plans again.
  'StaleSnapshotRefusal',
  // Compare-and-swap: the target's marker is no longer the one the plan saw (another writer came
  // between plan and write). Details carry planned_marker and current_marker.
  'MarkerMoved',
  // A write whose resolved path (after every symlinked parent) lands in Datum's own state or in
  // another resource type's area: .datum, releases, current, flags.
  'ProtectedAreaRefusal',
  // A service state file whose process is not provably the one Datum started: nothing is signalled.
  'ServiceIdentityUnverified',
  // Something larger than the agent's documented caps (src/agent/limits.ts).
  'SizeLimitExceeded',
  // What reaches outside the node's root (a package, a unit) that the host's agent.yaml does not
  // allow (its `allow`), or allows only from another source: desired state reaches no further.
  'NotAllowedByHost',
  // On a host whose agent.yaml requires signed intent (trust.require), or that was sent a signature
  // to check: the apply carries no signature, or one that is not by a key trust.desired lists, does
  // not match the document's bytes, or is over a document for another node or generation; or the
  // action is not one the signed document's own plan yields (src/domain/intended.ts).
  'UntrustedIntent',
  // The signed document's `expires` has passed on the host's clock: the author vouches for it no
  // longer (a freeze), so the host acts on it no more; observing goes on.
  'ExpiredIntent',
  // On a host that requires signatures (trust.require): an operator decision that widens what the
  // host may write (a retake, an approved removal) carries no operator signature, or one not by a
  // key trust.operators lists, not over a statement of exactly this decision, or past its expiry.
  'UntrustedDecision',
] as const;
export type RefusalType = (typeof REFUSALS)[number];

/**
 * Refusals about the signed document an apply carried, not about the node: they stand only while
 * the loop holds that same signature, so a document signed again (datum sign, then datum refresh)
 * is tried at once (src/domain/writers.ts standingRefusals).
 */
export const INTENT_REFUSALS: readonly RefusalType[] = ['UntrustedIntent', 'ExpiredIntent'];

/** Failure types of controller-side activities that retrying cannot fix. */
export const CONTROL_PERMANENT_ERRORS = [
  'InvalidDesiredState',
  'UnknownNode',
  'GenerationNotAtAuthority',
  'MisconfiguredWorker',
] as const;
/** Ledger append failures that retrying cannot fix (the entry is kept in the workflow either way). */
export const LEDGER_PERMANENT_ERRORS = ['InvalidLedgerEntry', 'LedgerSeqConflict', 'MisconfiguredWorker'] as const;

/**
 * How the ledger records a failed activity by its failure type: a refusal (the agent's typed
 * "no", which nothing but changed evidence can turn into a yes) or a failure to act. The agent's
 * metrics and the workflow's evidence both read it here, so they never disagree.
 */
export function outcomeOfFailure(type: string | null | undefined): 'refused' | 'failed' {
  return (REFUSALS as readonly string[]).includes(type ?? '') ? 'refused' : 'failed';
}
