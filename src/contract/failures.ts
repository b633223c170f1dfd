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
] as const;
export type RefusalType = (typeof REFUSALS)[number];

/** Failure types of controller-side activities that retrying cannot fix. */
export const CONTROL_PERMANENT_ERRORS = ['InvalidDesiredState', 'UnknownNode', 'GenerationNotAtAuthority', 'MisconfiguredWorker'] as const;
/** Ledger append failures that retrying cannot fix (the entry is kept in the workflow either way). */
export const LEDGER_PERMANENT_ERRORS = ['InvalidLedgerEntry', 'LedgerSeqConflict', 'MisconfiguredWorker'] as const;
