import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { DesiredStateAuthority, type AuthorityRead } from './authority';
import { createRolloutActivities } from './rollout';

export interface ControlDeps {
  fleetDir: string;
  /** Needed by the rollout's activities (start, attach, signal, query reconcile workflows). */
  client?: Client;
}

/**
 * The controller's activities. readAuthority runs as a local activity: it only reads the
 * fleet directory next to the worker, and a pass must not pay three history events for it.
 */
export function createControlActivities(deps: ControlDeps) {
  const authority = new DesiredStateAuthority(deps.fleetDir);
  return {
    async readAuthority(node: string): Promise<AuthorityRead> {
      return authority.read(node);
    },
    ...createRolloutActivities(authority, () => {
      if (!deps.client) throw ApplicationFailure.nonRetryable('this worker was started without a Temporal client for rollouts', 'MisconfiguredWorker');
      return deps.client;
    }),
  };
}

export type ControlActivities = ReturnType<typeof createControlActivities>;
export type { AuthorityRead };
