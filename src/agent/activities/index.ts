import path from 'node:path';
import { asyncLocalStorage } from '@temporalio/activity';
import type { AgentActivities } from '../../contract';
import { agentGate } from '../gate';
import { beatingOnceAdmitted } from '../heartbeat';
import { countedApply } from '../metrics';
import { loggedApply, loggedDecision, loggedObserve } from '../logging';
import { watchNode } from '../watch';
import { applyAction } from './apply';
import { inventoryNode } from './inventory';
import { observeNode } from './observe';
import { recordDecision } from './record-decision';
import { planRemoval, removeTargets } from './removal';

/*
 * The node agent's activities (task queue datum-node-<node>). Each re-reads agent.yaml on every
 * call: the mode and the overrides are the operator's, and a change takes effect on the next
 * observation or action without restarting the agent. Observes and applies of all the nodes a
 * process serves pass one gate (../gate.ts), applies first.
 *
 *   observe.ts          observe: the node read from the things themselves
 *   apply.ts            apply: config, refusals, fence, journal, the write, in numbered steps
 *   refusals.ts         the table of the agent's own refusals (steps 3 to 5 of apply)
 *   write-checks.ts     what must still hold at the moment of the write (steps 6, 8 and 9)
 *   target.ts           the action's target as observe reads it (the marker compared in step 9)
 *   record-decision.ts  recordDecision: an operator's decision, kept on the node
 *   inventory.ts        inventory: what `datum import` declares, read as observe reads it
 *   removal.ts          planRemoval, removeTargets: a planned removal, carried out only once approved
 *   ../watch.ts         watch: returns when something managed changes
 */

export function createAgentActivities(configPath: string): AgentActivities {
  const config = path.resolve(configPath);
  // Through the gate as this node (its share of the slots), holding a slot only while its attempt
  // lasts, and beating once it runs, not while it waits.
  const gated = <T>(kind: 'observe' | 'apply', work: () => Promise<T>) =>
    beatingOnceAdmitted((admitted) =>
      agentGate.run(
        kind,
        () => {
          admitted();
          return work();
        },
        { node: config, signal: asyncLocalStorage.getStore()?.cancellationSignal },
      ),
    );
  return {
    observe: (request) => gated('observe', () => loggedObserve(request, () => observeNode(config, request))),
    apply: (request) =>
      gated('apply', () => countedApply(request, () => loggedApply(request, () => applyAction(config, request)))),
    watch: (request) => watchNode(config, request),
    recordDecision: (request) => loggedDecision(request, () => recordDecision(config, request)),
    // A read like observe, through the same gate: an import of a busy node waits its turn.
    inventory: (request) => gated('observe', () => inventoryNode(config, request)),
    // A plan reads like observe; an approved removal writes like apply, under the same lock.
    planRemoval: (request) => gated('observe', () => planRemoval(config, request)),
    removeTargets: (request) => gated('apply', () => removeTargets(config, request)),
  };
}

export { applyAction } from './apply';
export { observeNode } from './observe';
export { recordDecision } from './record-decision';
export { targetMarker } from './target';
