import type { ApplicationFailure } from '@temporalio/common';
import { ACTIONS, DESTRUCTIVE_ACTIONS, sameIntent, type AuthorizedAction, type Json, type OperatorDecision } from '../../domain';
import { UNKNOWN_SPEC, heldBackByUnbound, unboundProblem, type ResolvedEntry } from '../node/claims';
import { effectiveMode } from '../config';
import type { AgentRefusal } from '../refusal';
import type { AgentConfig } from '../../schemas';
import { writtenBy } from './target';

/** Why the agent will not act, as a check finds it; apply turns it into the failure. */
export interface Refusal {
  type: AgentRefusal['type'];
  problem: string;
  fix: string;
  facts?: Record<string, Json>;
}

/** Raises a refusal as the non-retryable failure of the apply that met it. */
export type Refuse = (
  type: AgentRefusal['type'],
  problem: string,
  fix: string,
  facts?: Record<string, Json>,
) => ApplicationFailure;

/** The target an action writes and what protects it (src/agent/node/claims.ts). */
export interface TargetScope {
  /** The target's identity: where the write lands now (src/agent/fs/identity.ts). */
  target: string | null;
  /** The target as the action spells it. */
  spelled: string | null;
  /** Other keys of the action's generation that write the same target under another spelling. */
  sharedWith: string[];
  /** Key-based agent.yaml entries whose target cannot be established (src/agent/node/claims.ts unboundEntries). */
  unbound: ResolvedEntry[];
  /** agent.yaml entries that protect the action's key or its target. */
  entries: ResolvedEntry[];
  /** The operator decision (yield, open conflict) standing for the target, if any. */
  decision: OperatorDecision | null;
}

/** The target as written, and as spelled when a symlinked directory makes the two differ. */
const shown = (scope: TargetScope) =>
  scope.spelled !== null && scope.spelled !== scope.target ? `${scope.target} (spelled ${scope.spelled})` : scope.target;

const through = (e: ResolvedEntry) =>
  e.name === e.target || e.target === null ? e.entry : `${e.entry}, which protects ${e.target}`;

/**
 * The agent's own refusals, one row each, checked in this order on every apply whatever the
 * workflow decided: a wrong or forged workflow still meets every row. The first row that refuses
 * is the refusal the apply ends with.
 */
export const ACTION_CHECKS: readonly ((
  config: AgentConfig,
  action: AuthorizedAction,
  configPath: string,
  scope: TargetScope,
) => Refusal | null)[] = [
  // 3. Observe mode (host, resource or target): the operator's alone, so no commit to desired state can lift it.
  (config, action, configPath, scope) => {
    const mode = effectiveMode(config, action.resource_key);
    const entry = scope.entries.find((e) => e.kind === 'observe');
    if (mode.mode !== 'observe' && !entry) return null;
    const because = mode.because ?? `${through(entry!)}: observe`;
    const fix = mode.because
      ? 'an operator on the node sets reconciliation.mode: enforce (and removes the per-resource observe) to let Datum repair it'
      : `an operator on the node removes ${entry!.entry} to let Datum repair ${scope.target ?? action.resource_key}`;
    return {
      type: 'ObserveModeRefusal',
      problem: `${because} in ${configPath}`,
      fix,
      facts: { mode: 'observe', target: scope.target },
    };
  },
  // 4. Operator-owned: a person's deliberate state, never reverted, whatever key now claims the target.
  (_config, action, configPath, scope) => {
    const entry = scope.entries.find((e) => e.kind === 'override');
    const override = entry?.provenance;
    if (!entry || !override) return null;
    return {
      type: 'OperatorOwnedRefusal',
      problem: `${entry.name === action.resource_key ? `"${action.resource_key}"` : `"${action.resource_key}" writes ${shown(scope)}, which`} is operator-owned (${entry.name === action.resource_key ? '' : `${through(entry)}; `}override approved by ${override.approved_by} since ${override.since}: ${override.reason})`,
      fix: `the operator removes ${entry.entry} from ${configPath} when Datum may manage it again`,
      facts: { override, entry: entry.entry, target: scope.target },
    };
  },
  // 4a. An entry whose target cannot be established (its binding was lost with .datum/) may protect
  // this very file or release under a renamed key: fail closed rather than guess.
  (_config, action, _configPath, scope) => {
    if (scope.unbound.length === 0 || !heldBackByUnbound(action.action)) return null;
    const { problem, fix } = unboundProblem(scope.unbound);
    return {
      type: 'OperatorOwnedRefusal',
      problem,
      fix,
      facts: { target: scope.target, unbound: scope.unbound.map((e) => e.entry) },
    };
  },
  // 4b. An operator's yield (whatever value is written now: a new one needs an operator's decision
  // too), or an open conflict about this very value of the target: kept across generations.
  (_config, action, _configPath, scope) => {
    const d = scope.decision;
    const written = writtenBy(action);
    const same = !written || d?.spec_digest === UNKNOWN_SPEC || (d !== null && sameIntent(d, written));
    if (!d || (d.kind === 'conflict' && !same)) return null;
    const facts = {
      target: d.target,
      decision: d.kind,
      by: d.by,
      at: d.at,
      spec_digest: d.spec_digest,
      value_digest: d.value_digest,
    };
    const resolve = `datum resolve ${action.resource_key} on this node with --resolution retake`;
    return d.kind === 'yield'
      ? {
          type: 'OperatorOwnedRefusal',
          problem: `${d.target} was yielded to another writer by ${d.by} at ${d.at}${d.note ? ` (${d.note})` : ''}, ${same ? 'for this same value' : "and a new value needs an operator's decision before Datum writes it"}`,
          fix: `an operator retakes it (${resolve})`,
          facts,
        }
      : {
          type: 'ConflictOpenRefusal',
          problem: `a conflict with another writer is open on ${d.target} since ${d.at}, for this same value`,
          fix: `an operator decides: ${resolve}, or yield to leave it to the other writer`,
          facts,
        };
  },
  // 4c. One target, one owner: another key of this generation writes the same target under another
  // spelling (a symlinked directory), which desired-state validation cannot see.
  (_config, action, _configPath, scope) =>
    scope.sharedWith.length === 0
      ? null
      : {
          type: 'InvalidAction',
          problem: `"${action.resource_key}" writes ${shown(scope)}, which ${scope.sharedWith.map((k) => `"${k}"`).join(' and ')} of the same generation also write${scope.sharedWith.length > 1 ? '' : 's'} under another spelling, and one target has one owner`,
          fix: 'give each resource its own target in desired state (another path), or remove all but one of them',
          facts: { target: scope.target, spelled: scope.spelled, shared_with: scope.sharedWith },
        },
  // 5. Destructive kinds: never a repair, so a wrong or forged plan can fail to converge but never take a thing away.
  (_config, action) =>
    (DESTRUCTIVE_ACTIONS as readonly string[]).includes(action.action)
      ? {
          type: 'DestructiveActionRefusal',
          problem: `${action.action} is destructive and the agent never carries out destructive actions`,
          fix: 'an operator does this by hand if it is really wanted',
        }
      : null,
  // 5b. Unknown kinds: an agent and a controller of different releases never guess what an action means.
  (_config, action) =>
    (ACTIONS as readonly string[]).includes(action.action)
      ? null
      : {
          type: 'InvalidAction',
          problem: `"${action.action}" is not an action this agent knows (${ACTIONS.join(', ')})`,
          fix: 'upgrade the agent or the controller so both speak the same actions',
        },
];
