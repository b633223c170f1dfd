import { ApplicationFailure } from '@temporalio/common';
import type { Json } from '../domain';
import type { RefusalType } from '../contract';

/**
 * Failure type of a service that could not be started at all (no current release, command not
 * found). Not a refusal: the agent tried and failed, so the workflow records it as `failed`.
 */
export const SERVICE_START_FAILED = 'ServiceStartFailed';
/** A package manager that ran and failed (dpkg or apt-get exited non-zero): tried, not refused. */
export const PACKAGE_INSTALL_FAILED = 'PackageInstallFailed';
/** A service manager that ran and failed (systemctl exited non-zero): tried, not refused. */
export const UNIT_CHANGE_FAILED = 'UnitChangeFailed';

/** Failure types of what the agent tried and could not do (the workflow records `failed`, not `refused`). */
const FAILED = [SERVICE_START_FAILED, PACKAGE_INSTALL_FAILED, UNIT_CHANGE_FAILED] as const;

export type AgentFailureType = RefusalType | (typeof FAILED)[number];

/**
 * The agent will not (or cannot) do what it was asked, and retrying the same request cannot
 * change that. Thrown anywhere in the agent; the activity boundary turns it into a non-retryable
 * ApplicationFailure whose type is `type`, and observe turns it into an obstruction sentence.
 */
export class AgentRefusal extends Error {
  constructor(
    readonly type: AgentFailureType,
    message: string,
    readonly facts: Record<string, Json> = {},
  ) {
    super(message);
    this.name = type;
  }
}

/**
 * The ApplicationFailure for a refusal. `subject` names what was asked ("file.write of "config" on
 * node N-24"); providers throw the reason only, so every message reads the same way:
 * "<subject> refused: <why> — fix: <how>".
 */
export function toFailure(refusal: AgentRefusal, subject: string | null, context: Record<string, Json>): ApplicationFailure {
  const verb = (FAILED as readonly string[]).includes(refusal.type) ? 'failed' : 'refused';
  const message = subject === null ? refusal.message : `${subject} ${verb}: ${refusal.message}`;
  return ApplicationFailure.nonRetryable(message, refusal.type, { ...context, ...refusal.facts });
}
