/*
 * The node's agent as the loop reaches it: activity proxies on the node's task queue, the ports a
 * pass runs on (observe, apply, and the authority read), the operator decisions kept on the node,
 * and the watch. The watch's rules are one state machine (src/domain/watch.ts): this module feeds
 * it events and starts the watches it asks for.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  TimeoutFailure,
  log,
  proxyActivities,
  type ActivityInterfaceFor,
} from '@temporalio/workflow';
import { TimeoutType } from '@temporalio/common';
import {
  agentResources,
  durationMs,
  watchStep,
  type ApplyFailure,
  type AuthorizedAction,
  type BoundIntent,
  type Decision,
  type ExecutionEvidence,
  type Markers,
  type Observation,
  type PassPorts,
  type RecordDecisionRequest,
  type Snapshot,
  type WatchEffect,
  type WatchEvent,
  type WatchState,
} from '../domain';
import {
  REFUSALS,
  WORKFLOW_PATCH,
  agentTaskQueue,
  outcomeOfFailure,
  type AgentActivities,
  type ApplyRequest,
  type RecordDecisionResult,
  type WatchRequest,
} from '../contract';
import { authorityView, readAuthority } from './intent';
import { nowIso } from './ledger';
import { inForce } from './patches';
import { summaryLine } from './summaries';

/** An apply may fetch and unpack a release or wait for a service to become healthy. */
const APPLY_TIMEOUT = '10m';
/**
 * An observation reads files and /proc and probes health with short timeouts: seconds. Past this
 * the task is taken as lost (an agent that died holding it, a poll answered after the agent
 * stopped waiting for it) and retried, instead of holding the loop for an apply's ten minutes.
 */
const OBSERVE_TIMEOUT = '1m';
/**
 * A watch beats every 4 minutes (0.8 × this, the agent's maxHeartbeatThrottleInterval), not every
 * 24 s: each beat is a server write, about 150 per watched loop-hour at a 30 s timeout. An agent
 * killed while watching is announced by the next one to start on its node, which ends the watch
 * (src/agent/node/watch-tokens.ts); this timeout bounds only an agent that does not come back.
 */
const WATCH_HEARTBEAT_TIMEOUT = '5m';
/**
 * How long one watch runs before it returns "nothing changed" and the loop starts another; one
 * that ends at the loop's resync runs until then, if sooner (patch watch-ends-at-resync).
 */
export const WATCH_WINDOW_MS = 10 * 60_000;

/** The patches asked as a run starts that shape how it reaches its agent. */
export interface AgentPatches {
  /** observation-bound: an observation has node_timeout + observation_ttl to come back. */
  bounded: boolean;
  /** watch-hands-back-observation: a watch that sees a change observes, and the pass it wakes decides on that. */
  handBack: boolean;
  /** apply-hands-back-probe: the last action of a pass observes after it, and that snapshot is the probe. */
  probeInApply: boolean;
}

export interface NodeAgents {
  agent: ActivityInterfaceFor<AgentActivities>;
  observer: ActivityInterfaceFor<AgentActivities>;
  watcher: ActivityInterfaceFor<AgentActivities>;
  nodeTimeout: string;
  observationTtl: string;
  /** What the agents are asked about: the bound intent's resources, artifacts where the controller resolved them. */
  resources: BoundIntent['resources'];
  /** Asked of each watch, when the run hands back observations: observe this generation after a change. */
  observeOnChange: WatchRequest['observe_on_change'];
  /** Asked of a pass's last action, when the run takes its probe from it: observe this generation after it. */
  probeAfter: ApplyRequest['probe_after'];
}

/**
 * The node's agent for one bound intent. scheduleToStartTimeout is node_timeout: an agent that does
 * not pick the task up by then is unreachable, which is a decision (NODE_UNREACHABLE), not a hang.
 * The agent heartbeats while it works: a task silent for 30 s is lost, and is retried. The watch
 * is long-lived, beats rarely and is never retried by Temporal; the loop decides when to start
 * the next one.
 */
export function nodeAgents(node: string, intent: BoundIntent, { bounded, handBack, probeInApply }: AgentPatches): NodeAgents {
  const nodeTimeout = intent.policy.node_timeout;
  const resources = agentResources(intent);
  const base = {
    taskQueue: agentTaskQueue(node),
    scheduleToStartTimeout: durationMs(nodeTimeout),
    heartbeatTimeout: '30s',
  } as const;
  const retry = { initialInterval: '1s', backoffCoefficient: 2, maximumAttempts: 3, nonRetryableErrorTypes: [...REFUSALS] };
  // An observation later than node_timeout + observation_ttl could not be fresh anyway: past that
  // bound the loop knows it is blind (NODE_UNREACHABLE) at once, retries or not (patch observation-bound).
  const bound = bounded ? { scheduleToCloseTimeout: observationBoundMs(intent.policy) } : {};
  return {
    agent: proxyActivities<AgentActivities>({ ...base, startToCloseTimeout: APPLY_TIMEOUT, retry }),
    observer: proxyActivities<AgentActivities>({ ...base, ...bound, startToCloseTimeout: OBSERVE_TIMEOUT, retry }),
    watcher: proxyActivities<AgentActivities>({
      ...base,
      heartbeatTimeout: WATCH_HEARTBEAT_TIMEOUT,
      startToCloseTimeout: WATCH_WINDOW_MS + 60_000,
      retry: { maximumAttempts: 1 },
    }),
    nodeTimeout,
    observationTtl: intent.policy.observation_ttl,
    resources,
    observeOnChange: handBack ? { generation: intent.generation } : undefined,
    probeAfter: probeInApply ? { node, resources, generation: intent.generation } : undefined,
  };
}

/** The part of the loop the agents and the watch read and move. */
export interface Watched {
  readonly node: string;
  readonly intent: BoundIntent;
  readonly lastDecision: Decision | null;
  readonly agents: NodeAgents;
  watch: WatchState;
}

export function passPorts(loop: Watched): PassPorts {
  const { node, agents } = loop;
  const generation = loop.intent.generation;
  // The observation after an apply is the pass's proof: the UI names it the probe.
  let acted = false;
  // The snapshot the pass's last action took after it (probe_after), while it is the newest one.
  let probed: Observation | null = null;
  return {
    observe: async (): Promise<Snapshot> => {
      const handed = acted ? youngEnough(loop, probed) : handedObservation(loop);
      probed = null;
      if (handed) {
        watchEvent(loop, { kind: 'observed', markers: markersOf(handed) });
        return { observation: handed, unreachable: null };
      }
      const summary = summaryLine(`${acted ? 'probe' : 'observe'} ${node}`);
      try {
        const observation = await agents.observer.observe.executeWithOptions({ summary }, [
          { node, resources: agents.resources, generation },
        ]);
        watchEvent(loop, { kind: 'observed', markers: markersOf(observation) });
        return { observation, unreachable: null };
      } catch (error) {
        watchEvent(loop, { kind: 'observed', markers: null });
        return { observation: null, unreachable: describeFailure(error, agents) };
      }
    },
    readAuthority: async () => authorityView(await readAuthority(node)),
    apply: async (action: AuthorizedAction, { last }): Promise<ExecutionEvidence | ApplyFailure> => {
      acted = true;
      probed = null;
      const request: ApplyRequest = { node, action };
      // The signed bytes as the authority holds them, for a host that verifies them.
      if (loop.intent.signed) request.signed = loop.intent.signed;
      if (last && agents.probeAfter) request.probe_after = agents.probeAfter;
      try {
        const { probe, ...evidence } = await agents.agent.apply.executeWithOptions(
          { summary: summaryLine(`apply ${action.action} ${action.resource_key}${request.probe_after ? ', then probe' : ''}`) },
          [request],
        );
        probed = probe ?? null;
        return evidence;
      } catch (error) {
        return applyFailure(error, agents);
      }
    },
    now: nowIso,
    ruleInForce: inForce,
  };
}

/**
 * The snapshot the watch took after the change that woke this pass, while it is young enough to
 * decide on: at most half of observation_ttl old, so the decision finds it fresh with room to
 * spare (an older one, from a wake the controller took long to serve, is observed again). The
 * watch hands one back only for the resources it watched and only when every observation the loop
 * took meanwhile found the node as the watch started from (src/domain/watch.ts).
 */
function handedObservation(loop: Watched): Observation | null {
  return youngEnough(loop, loop.watch.handed);
}

/** A snapshot the agent handed back, if at most half of observation_ttl old now; else the pass observes. */
function youngEnough(loop: Pick<Watched, 'agents'>, snapshot: Observation | null): Observation | null {
  if (!snapshot) return null;
  const age = Date.now() - Date.parse(snapshot.observed_at);
  return age <= durationMs(loop.agents.observationTtl) / 2 ? snapshot : null;
}

/** The change marker of each observed resource, as the watch compares them. */
function markersOf(observation: Observation): Markers {
  return Object.fromEntries(Object.entries(observation.resources).map(([key, r]) => [key, r.marker]));
}

/** Feeds one event to the watch's state machine and carries out what it asks; `nowMs` as waitForEvidence reads it. */
export function watchEvent(loop: Watched, event: WatchEvent, nowMs = Date.now()): void {
  const { state, effects } = watchStep(loop.watch, event, {
    now_ms: nowMs,
    policy: loop.intent.policy,
    status: loop.lastDecision?.convergence_status ?? null,
    rules: inForce,
  });
  loop.watch = state;
  for (const effect of effects) startWatch(loop, effect);
}

/**
 * Event-driven observation: its return (a change, or an end without one) is the watch's next
 * event. A watch that ends at the loop's resync (effect.ends_at_ms) has its window end there and
 * observes at its end: the resync's snapshot.
 */
function startWatch(loop: Watched, effect: WatchEffect): void {
  const { resources, observeOnChange } = loop.agents;
  // The wait asks for one only within WATCH_WINDOW_MS of the resync (reconcileNode.ts).
  const endsAt = effect.ends_at_ms;
  const window = endsAt === undefined ? WATCH_WINDOW_MS : Math.max(0, endsAt - Date.now());
  const request: WatchRequest = { node: loop.node, resources, window_ms: window };
  if (effect.baseline) request.baseline = effect.baseline;
  if (observeOnChange) request.observe_on_change = observeOnChange;
  if (observeOnChange && endsAt !== undefined) request.observe_at_end = true;
  const atResync = endsAt !== undefined;
  const watch = effect.watch;
  const summary = summaryLine(`watch ${loop.node}${atResync ? ' until its resync' : ''}`);
  void loop.agents.watcher.watch.executeWithOptions({ summary }, [request]).then(
    (result) =>
      watchEvent(loop, {
        kind: 'ended',
        watch,
        changed: result.changed,
        against_baseline: result.reason === 'changed since observation',
        elapsed: result.reason === 'window elapsed',
        // Only what this run asked for: a snapshot of the resources the loop is still bound to.
        ...(observeOnChange && result.observation && loop.agents.resources === resources
          ? { observation: result.observation }
          : {}),
      }),
    () => watchEvent(loop, { kind: 'failed', watch }),
  );
}

/**
 * Operator decisions kept on the node (docs/architecture.md §4 "Targets and operator decisions"):
 * the agent refuses to overwrite a yielded or contested target, and the next generation starts
 * from them. A node that cannot take one now is told again after the next pass (decide lists what
 * it lacks).
 */
export async function recordDecisions(
  loop: Pick<Watched, 'node' | 'agents'>,
  requests: RecordDecisionRequest[],
): Promise<Array<RecordDecisionResult | { refused: string; type: string | null }>> {
  if (requests.length === 0 || !inForce(WORKFLOW_PATCH.durableOperatorDecisions)) return [];
  const answers: Array<RecordDecisionResult | { refused: string; type: string | null }> = [];
  for (const request of requests) {
    try {
      answers.push(
        await loop.agents.observer.recordDecision.executeWithOptions(
          { summary: summaryLine(`record decision on ${loop.node}: ${request.kind} ${request.resource_key}`) },
          [request],
        ),
      );
    } catch (error) {
      const detail = describeFailure(error, loop.agents);
      log.warn('the agent did not keep an operator decision; the next pass sends it again', {
        resource_key: request.resource_key,
        kind: request.kind,
        error: detail,
      });
      const cause = error instanceof ActivityFailure ? error.cause : undefined;
      const refusal = cause instanceof ApplicationFailure ? cause : null;
      answers.push({ refused: refusal?.message ?? detail, type: refusal?.type ?? null });
    }
  }
  return answers;
}

/** A failed apply as the domain reads it: the agent's typed refusal, or a failure to act. */
function applyFailure(error: unknown, agents: Pick<NodeAgents, 'nodeTimeout' | 'observationTtl'>): ApplyFailure {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (cause instanceof ApplicationFailure && outcomeOfFailure(cause.type) === 'refused') {
    return { kind: 'refused', refusal_type: cause.type ?? '', message: cause.message };
  }
  return { kind: 'failed', detail: describeFailure(error, agents) };
}

/** How long an observation may take, from its request to its answer: picked up within node_timeout, back within observation_ttl. */
const observationBoundMs = (policy: BoundIntent['policy']) =>
  durationMs(policy.node_timeout) + durationMs(policy.observation_ttl);

function describeFailure(
  error: unknown,
  { nodeTimeout, observationTtl }: Pick<NodeAgents, 'nodeTimeout' | 'observationTtl'>,
): string {
  const timeout = error instanceof ActivityFailure && error.cause instanceof TimeoutFailure ? error.cause.timeoutType : null;
  if (timeout === TimeoutType.SCHEDULE_TO_START) return `no agent took the task on its queue within node_timeout ${nodeTimeout}`;
  if (timeout === TimeoutType.SCHEDULE_TO_CLOSE)
    return `an agent took the observation but none came back within node_timeout ${nodeTimeout} + observation_ttl ${observationTtl}, past which no snapshot could be fresh (the agent may still be beating: its observation is stuck)`;
  if (error instanceof ActivityFailure && error.cause) return `${error.cause.name}: ${error.cause.message}`;
  return error instanceof Error ? error.message : String(error);
}
