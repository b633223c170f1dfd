import { ApplicationFailure } from '@temporalio/common';
import type { Json } from '../domain';
import type { RefusalType } from '../contract';

/**
 * Failure type of a service that could not be started at all (no current release, command not
 * found). Not a refusal: the agent tried and failed, so the workflow records it as `failed`.
 */
export const SERVICE_START_FAILED = 'ServiceStartFailed';

export type AgentFailureType = RefusalType | typeof SERVICE_START_FAILED;

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
  const verb = refusal.type === SERVICE_START_FAILED ? 'failed' : 'refused';
  const message = subject === null ? refusal.message : `${subject} ${verb}: ${refusal.message}`;
  return ApplicationFailure.nonRetryable(message, refusal.type, { ...context, ...refusal.facts });
}
