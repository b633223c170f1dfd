import path from 'node:path';
import { asyncLocalStorage } from '@temporalio/activity';
import type {
  AgentActivities,
  ApplyAnswer,
  ApplyRequest,
  Observation,
  ObserveRequest,
  WatchRequest,
  WatchResult,
} from '../../contract';
import type { ExecutionEvidence } from '../../domain';
import { activeTracing } from '../../tracing';
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
  const observe = (request: ObserveRequest) => gated('observe', () => loggedObserve(request, () => observeNode(config, request)));
  return {
    observe,
    apply: (request) =>
      probingAfter(
        request,
        gated('apply', () => countedApply(request, () => loggedApply(request, () => applyAction(config, request)))),
        observe,
      ),
    watch: (request) => handingBack(request, watchNode(config, request), observe),
    recordDecision: (request) => loggedDecision(request, () => recordDecision(config, request)),
    // A read like observe, through the same gate: an import of a busy node waits its turn.
    inventory: (request) => gated('observe', () => inventoryNode(config, request)),
    // A plan reads like observe; an approved removal writes like apply, under the same lock.
    planRemoval: (request) => gated('observe', () => planRemoval(config, request)),
    removeTargets: (request) => gated('apply', () => removeTargets(config, request)),
  };
}

type Observe = (request: ObserveRequest) => Promise<Observation>;

/**
 * A watch that saw a change observes the node at once when its loop asks (observe_on_change), so
 * the pass the change wakes decides on that snapshot instead of sending another observe round
 * trip. One whose window ran out does too when asked (observe_at_end): its loop set the window to
 * end at its resync, and the resync pass decides on that snapshot.
 */
async function handingBack(request: WatchRequest, watching: Promise<WatchResult>, observe: Observe): Promise<WatchResult> {
  const result = await watching;
  const asked = request.observe_on_change;
  const atEnd = request.observe_at_end === true && result.reason === 'window elapsed';
  if (!asked || (result.changed.length === 0 && !atEnd)) return result;
  const observation = await handedBack(() => observe({ node: request.node, resources: request.resources, ...asked }));
  return observation ? { ...result, observation } : result;
}

/**
 * The last action of a pass observes the node once it is carried out, when its loop asks
 * (probe_after): that snapshot is the pass's post-action probe, taken after every write of the
 * pass, without another activity. A refused or failed action throws as before, and the loop
 * probes for itself. Where tracing is on the probe has a span of its own, under the apply's.
 */
async function probingAfter(request: ApplyRequest, applying: Promise<ExecutionEvidence>, observe: Observe): Promise<ApplyAnswer> {
  const evidence = await applying;
  const asked = request.probe_after;
  if (!asked) return evidence;
  const tracing = activeTracing();
  const probe = await handedBack(() => (tracing ? tracing.inSpan('probe', () => observe(asked)) : observe(asked)));
  return probe ? { ...evidence, probe } : evidence;
}

/** A snapshot to hand back with another answer; none when the observation fails (the loop then observes, and hears why). */
async function handedBack(observe: () => Promise<Observation>): Promise<Observation | null> {
  try {
    return await observe();
  } catch {
    return null;
  }
}

export { applyAction } from './apply';
export { observeNode } from './observe';
export { recordDecision } from './record-decision';
export { targetMarker } from './target';
