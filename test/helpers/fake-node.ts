// Typed fakes of the agent and the authority for workflow tests on the time-skipping server,
// where timers and budgets are measured in skipped time. They implement the real activity
// interfaces (AgentActivities, ControlActivities' readAuthority), so a signature change breaks
// the tests at compile time. The real agent is exercised by test/agent and test/integration.
import { Context } from '@temporalio/activity';
import type { AuthorityRead, ControlActivities } from '../../src/activities';
import type { BoundIntent, ExecutionEvidence, LedgerEntry, Mode, OperatorDecision } from '../../src/domain';
import type { AgentActivities, ApplyRequest, ObserveRequest } from '../../src/contract';
import { D7, n24, snapshot, type NodeState } from '../unit/fixtures';

export interface Call {
  name: 'observe' | 'apply' | 'recordDecision';
  /** Server time (skipped time on the time-skipping server) at which the call was scheduled. */
  at: number;
  action?: string;
}

export interface FakeNodeOptions {
  /** Applies "succeed" but change nothing (seed probe 4). */
  ineffective?: boolean;
  mode?: Mode;
}

export interface FakeNode {
  /** The agent's activities, for a worker on datum-node-N-24. */
  activities: AgentActivities;
  /** The node as it is now; tests change it by hand (an operator on the node). */
  state: NodeState;
  /** Every observe and apply, in order, stamped with server time. */
  calls: Call[];
}

/** N-24 as an in-memory node: build 7.3 running 7.3 on D7, maintenance overridden by oncall. */
export function fakeNode(options: FakeNodeOptions = {}): FakeNode {
  const state: NodeState = {
    build: '7.3',
    config: D7(),
    app: { build: '7.3', config_sha256: D7() },
    maintenance: true,
    markers: {},
  };
  const calls: Call[] = [];
  let writes = 0;
  const now = () => Context.current().info.currentAttemptScheduledTimestampMs;

  const activities: AgentActivities = {
    async observe(_request: ObserveRequest) {
      const at = now();
      calls.push({ name: 'observe', at });
      return Promise.resolve(snapshot(state, { at: new Date(at).toISOString(), mode: options.mode ?? 'enforce' }));
    },
    // The time-skipping server cannot skip time while an activity runs, so these tests use
    // policy.watch: false and a watch here is a test bug.
    async watch(): Promise<never> {
      return Promise.reject(new Error('fakeNode has no watch: run time-skipping tests with policy.watch false'));
    },
    // No loop asks for an import; a test that does is a test bug.
    async inventory(): Promise<never> {
      return Promise.reject(new Error('fakeNode has no inventory: datum import is tested against the real agent'));
    },
    // Removals are planned and carried out by removal items, never by a loop: tested on the real agent.
    async planRemoval(): Promise<never> {
      return Promise.reject(new Error('fakeNode has no removals: they are tested against the real agent'));
    },
    async removeTargets(): Promise<never> {
      return Promise.reject(new Error('fakeNode has no removals: they are tested against the real agent'));
    },
    // Operator decisions are kept by the real agent (src/agent/node/claims.ts); this node only counts them.
    async recordDecision(request) {
      calls.push({ name: 'recordDecision', at: now() });
      return Promise.resolve({ target: request.target, holds: null });
    },
    async apply({ action }: ApplyRequest): Promise<ExecutionEvidence> {
      const at = now();
      calls.push({ name: 'apply', at, action: `${action.resource_key}:${action.action}` });
      const marker = `ours:${++writes}`;
      state.markers = { ...state.markers, [action.resource_key]: marker };
      if (!options.ineffective) {
        if (action.resource_key === 'build') state.build = '7.4';
        if (action.resource_key === 'app') state.app = { build: state.build ?? '7.3', config_sha256: state.config ?? '' };
      }
      return Promise.resolve({
        resource_key: action.resource_key,
        action: action.action,
        idempotency_key: action.idempotency_key,
        outcome: 'applied',
        executed_at: new Date(at).toISOString(),
        marker_after: marker,
        detail: 'exit 0',
        refusal: null,
      });
    },
  };
  return { activities, state, calls };
}

export interface FakeAuthority {
  /** What appendLedger took, keyed like the real store: `<workflow_id>/<chain_id>/<seq>`. */
  stored: Map<string, LedgerEntry>;
  /** The authority now holds `intent` (a new generation, or the same one changed). */
  set(intent: BoundIntent): void;
  /** The authority can no longer be read (an invalid file): readAuthority answers `error`. */
  fail(error: string): void;
  /** The controller's activities, for a worker on the control task queue. */
  activities: ControlActivities;
}

/** The authority as a variable: tests move it between generations. */
export function fakeAuthority(initial: BoundIntent = n24(12, { policy: { watch: false } })): FakeAuthority {
  let current: AuthorityRead = { ok: true, intent: initial };
  const stored = new Map<string, LedgerEntry>();
  return {
    stored,
    set(intent: BoundIntent) {
      current = { ok: true, intent };
    },
    fail(error: string) {
      current = { ok: false, kind: 'invalid', error };
    },
    activities: {
      async readAuthority(node: string): Promise<AuthorityRead> {
        if (node !== 'N-24') return { ok: false, kind: 'unknown_node', error: `no desired state for node "${node}"` };
        return Promise.resolve(current);
      },
      /** An in-memory ledger store with the real one's idempotency key. */
      async appendLedger(input: { entry: LedgerEntry; chain_id: string }): Promise<'appended' | 'duplicate'> {
        const key = `${input.entry.workflow_id}/${input.chain_id}/${input.entry.seq}`;
        if (stored.has(key)) return Promise.resolve('duplicate');
        stored.set(key, input.entry);
        return Promise.resolve('appended');
      },
      /** The decisions of the newest stored entry, as operatorDecisionsOf reads them. */
      async storedDecisions(): Promise<OperatorDecision[]> {
        const entries = [...stored.values()];
        return Promise.resolve(entries[entries.length - 1]?.operator_decisions ?? []);
      },
      /** The hold on the newest stored entry, as the real store's storedHold reads it. */
      async storedHold() {
        const entries = [...stored.values()];
        return Promise.resolve(entries[entries.length - 1]?.hold ?? null);
      },
      async prepareRolloutNodes(): Promise<never> {
        return Promise.reject(new Error('rollouts are not part of these tests'));
      },
      async nodeStates(): Promise<never> {
        return Promise.reject(new Error('rollouts are not part of these tests'));
      },
      async gateEvidence(): Promise<never> {
        return Promise.reject(new Error('rollouts are not part of these tests'));
      },
      async rollbackPlan(): Promise<never> {
        return Promise.reject(new Error('rollouts are not part of these tests'));
      },
      async writeRollback(): Promise<never> {
        return Promise.reject(new Error('rollouts are not part of these tests'));
      },
      async endNodeLoops(): Promise<never> {
        return Promise.reject(new Error('removals are not part of these tests'));
      },
      /** Work items run on a real server only (test/integration/work-items.test.ts): the reports go nowhere here. */
      async reportWork(): Promise<{ discovered: string[] }> {
        return Promise.resolve({ discovered: [] });
      },
      async updateRequester(): Promise<never> {
        return Promise.reject(new Error('work items are not part of these tests'));
      },
      async forwardResolution(): Promise<never> {
        return Promise.reject(new Error('work items are not part of these tests'));
      },
      async confirmReport(): Promise<never> {
        return Promise.reject(new Error('work items are not part of these tests'));
      },
      /** Who sent a signal is read on a real server only (test/integration/loop-failures.test.ts): unknown here. */
      async signalRequester(): Promise<null> {
        return Promise.resolve(null);
      },
      async lookAtFleet(): Promise<never> {
        return Promise.reject(new Error('the fleet workflow runs on a real server only (test/integration/fleet.test.ts)'));
      },
      async reportFleetWork(): Promise<never> {
        return Promise.reject(new Error('the fleet workflow runs on a real server only (test/integration/fleet.test.ts)'));
      },
      async openFleetItems(): Promise<never> {
        return Promise.reject(new Error('the fleet workflow runs on a real server only (test/integration/fleet.test.ts)'));
      },
    },
  };
}
