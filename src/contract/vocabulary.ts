/*
 * The closed sets Datum's decisions, ledger and conditions are written in. Each value has one line
 * saying what it means (a `Record` over the set, so a value without one does not compile); the
 * ledger, `datum` and the docs use these words, and docs/architecture.md §6 says where each is
 * produced. Adding a value is a contract change: the ledger store, dashboards and resolvers read
 * them.
 */

export const STATUSES = ['CONVERGED', 'DRIFTED', 'RETRY', 'BLOCKED', 'CONFLICT', 'SUPERSEDED'] as const;
export type ConvergenceStatus = (typeof STATUSES)[number];
export const STATUS_MEANINGS: Record<ConvergenceStatus, string> = {
  CONVERGED: 'in a fresh snapshot under current intent, each enforced managed resource has its desired value',
  DRIFTED: 'managed drift that observe mode holds back; or, inside a pass only, drift about to be repaired',
  RETRY: 'a repair did not take, or other drift appeared, and budget remains; the next pass waits for the backoff',
  BLOCKED: 'Datum will not act until the evidence the recheck trigger names changes',
  CONFLICT: 'another writer changes a managed resource; repair halts on the node until an operator decides',
  SUPERSEDED: "a newer generation's loop owns the node; this loop ended",
};

/** The reasons of a note: an entry that records a signal or a hand-over, not a pass. */
export const NOTE_REASONS = [
  'NEWER_GENERATION',
  'REFRESH_REFUSED',
  'REBOUND',
  'OPERATOR_RESOLUTION_RECORDED',
  'SIGNAL_REJECTED',
  'HOLD_PLACED',
  'HOLD_LIFTED',
] as const;
export type NoteReason = (typeof NOTE_REASONS)[number];

/** The closed set of reasons. Each decision carries exactly one, plus a human sentence. */
export const REASONS = [
  'ALREADY_CONVERGED',
  'CONVERGED_AFTER_REPAIR',
  'DRIFT_DETECTED',
  'OBSERVE_MODE_DRIFT',
  'HELD',
  'ACTION_INEFFECTIVE',
  'ACTION_FAILED',
  'STALE_OBSERVATION',
  'STALE_INTENT',
  'INTENT_DIGEST_MISMATCH',
  'AUTHORITY_REGRESSED',
  'INVALID_DESIRED_STATE',
  'AGENT_CONFIG_INVALID',
  'NODE_UNREACHABLE',
  'RETRY_BUDGET_EXHAUSTED',
  'REPAIR_DEADLINE_EXCEEDED',
  'UNKNOWN_OWNERSHIP',
  'DESTRUCTIVE_REPAIR_REQUIRED',
  'DEPENDENCY_BLOCKED',
  'ACTION_REFUSED',
  'CONFLICTING_WRITER',
  'REPEATED_DRIFT',
  ...NOTE_REASONS,
] as const;
export type Reason = (typeof REASONS)[number];
export const REASON_MEANINGS: Record<Reason, string> = {
  ALREADY_CONVERGED: 'nothing to do, including a replayed generation',
  CONVERGED_AFTER_REPAIR: 'repaired in this pass and proven by the fresh probe',
  DRIFT_DETECTED: 'drift being repaired now; or drift that appeared while a repair took',
  OBSERVE_MODE_DRIFT: 'drift reported with the full plan, not applied (observe mode)',
  HELD: 'drift reported with the full plan, not applied: an operator holds the node (`datum hold`)',
  ACTION_INEFFECTIVE: 'an action ran, our own marker is there, and the value is still wrong',
  ACTION_FAILED: 'an action failed (transport, service start) or was skipped after one',
  STALE_OBSERVATION: 'the snapshot is older than observation_ttl, whatever the heartbeat says',
  STALE_INTENT: 'the authority holds a newer generation, or the bound one is past its expires',
  INTENT_DIGEST_MISMATCH: 'same generation, different content',
  AUTHORITY_REGRESSED: 'the authority went back to an older generation',
  INVALID_DESIRED_STATE: 'the desired-state file no longer reads or validates',
  AGENT_CONFIG_INVALID: "the node's agent.yaml does not validate, so ownership and mode are unknown",
  NODE_UNREACHABLE: 'no snapshot: no agent took the task within node_timeout, or the observe failed',
  RETRY_BUDGET_EXHAUSTED: 'retry_budget repairs did not take',
  REPAIR_DEADLINE_EXCEEDED: 'the repair episode outlived policy.repair_deadline and the resource still differs',
  UNKNOWN_OWNERSHIP: 'something whose owner is not proven; nothing claims convergence over it',
  DESTRUCTIVE_REPAIR_REQUIRED: 'the only repair would destroy something; a repair never destroys',
  DEPENDENCY_BLOCKED: 'an enforced resource differs because what it depends on cannot be repaired now',
  ACTION_REFUSED: 'the agent refused, and the same action would be refused again',
  CONFLICTING_WRITER: 'another writer; conflict evidence attached',
  REPEATED_DRIFT:
    'a target drifted again after policy.writer_repairs repairs within writer_horizon: a writer slower than conflict_window; the repairs are the evidence',
  NEWER_GENERATION: 'handed over to datum/<node>/gen-<g>',
  REFRESH_REFUSED: 'a refreshDesired did not match the authority, or went backwards',
  REBOUND: "the same generation re-bound to the authority's content; a pass follows",
  OPERATOR_RESOLUTION_RECORDED: 'a resolveConflict is recorded; an observation will close the conflict',
  SIGNAL_REJECTED: 'a malformed or inapplicable signal, recorded and not applied',
  HOLD_PLACED: 'an operator held the node: repairs stop, observing and reporting go on',
  HOLD_LIFTED: 'the hold ended (`datum unhold`, or its time passed); a pass follows and repairs',
};

/** What evidence must change before the loop judges again (a decision's recheck_trigger.trigger). */
export const RECHECK_TRIGGERS = [
  'FRESH_OBSERVATION',
  'REFRESHED_INTENT',
  'DESIRED_STATE_CHANGE',
  'OPERATOR_RESOLUTION',
  'AGENT_CONFIG_CHANGE',
  'TIMER',
  'NONE',
] as const;
export type RecheckTriggerKind = (typeof RECHECK_TRIGGERS)[number];
export const RECHECK_TRIGGER_MEANINGS: Record<RecheckTriggerKind, string> = {
  FRESH_OBSERVATION: 'a new snapshot from the node',
  REFRESHED_INTENT: "a refreshDesired or rollout to the authority's generation",
  DESIRED_STATE_CHANGE: 'the desired-state file itself',
  OPERATOR_RESOLUTION: "an operator's decision (resolveConflict, clearing an obstruction, declaring ownership)",
  AGENT_CONFIG_CHANGE: "the node's agent.yaml",
  TIMER: 'time: not_before is the backoff or the next resync',
  NONE: 'nothing: the answer follows within the pass, or the loop has ended',
};

/** The conditions a decision can hold open (resolver and judgement: src/domain/conditions.ts). */
export const CONDITION_TYPES = [
  'NODE_UNREACHABLE',
  'STALE_OBSERVATION',
  'STALE_INTENT',
  'INTENT_DIGEST_MISMATCH',
  'INVALID_DESIRED_STATE',
  'AGENT_CONFIG_INVALID',
  'UNKNOWN_OWNERSHIP',
  'DESTRUCTIVE_REPAIR_REQUIRED',
  'RETRY_BUDGET_EXHAUSTED',
  'REPAIR_DEADLINE_EXCEEDED',
  'REPAIR_RETRYING',
  'ACTION_REFUSED',
  'CONFLICTING_WRITER',
  'OBSERVED_DRIFT',
  'DRIFT_HELD',
  'INVALID_SIGNAL',
] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];
/** What a condition of each type stays open for. */
export const CONDITION_MEANINGS: Record<ConditionType, string> = {
  NODE_UNREACHABLE: 'the node does not answer',
  STALE_OBSERVATION: 'snapshots arrive older than the TTL (or outlive it before a write)',
  STALE_INTENT: 'the authority is at another generation (newer or regressed), or the bound one expired',
  INTENT_DIGEST_MISMATCH: "the bound generation's content changed",
  INVALID_DESIRED_STATE: 'the authority cannot be read or validated',
  AGENT_CONFIG_INVALID: 'agent.yaml does not validate',
  UNKNOWN_OWNERSHIP: "a resource's owner is not proven",
  DESTRUCTIVE_REPAIR_REQUIRED: 'the only repair would destroy something',
  RETRY_BUDGET_EXHAUSTED: 'the budget is spent and the resource still differs',
  REPAIR_DEADLINE_EXCEEDED: 'repair_deadline has passed in this episode and the resource still differs',
  REPAIR_RETRYING: 'a repair is being retried within budget',
  ACTION_REFUSED: 'a standing refusal nothing has changed about',
  CONFLICTING_WRITER: 'a conflict is open (including a resolved one not yet confirmed)',
  OBSERVED_DRIFT: 'managed drift held back by observe mode',
  DRIFT_HELD: "managed drift held back by an operator's hold on the node",
  INVALID_SIGNAL: "a signal name's last payload was rejected",
};

/** Who can clear a condition. */
export const RESOLVERS = ['datum', 'operator', 'desired-state author'] as const;
export type Resolver = (typeof RESOLVERS)[number];
export const RESOLVER_MEANINGS: Record<Resolver, string> = {
  datum: 'Datum clears it by itself when the evidence changes (a retry, a fresh snapshot)',
  operator: 'a person or a resolver program on the node side: agent.yaml, the agent, resolveConflict',
  'desired-state author': 'whoever writes desired/nodes/<node>.yaml',
};

/** Who owns a resource, judged per target on every pass (docs/architecture.md §4). */
export const OWNERSHIPS = ['MANAGED', 'OPERATOR_OWNED', 'UNKNOWN'] as const;
export type Ownership = (typeof OWNERSHIPS)[number];
export const OWNERSHIP_MEANINGS: Record<Ownership, string> = {
  MANAGED: 'declared in desired state, observed, and nothing local claims it: Datum may reconcile it',
  OPERATOR_OWNED: 'an override with provenance, or yielded by an operator: recorded, never reverted',
  UNKNOWN: 'ownership not proven: never touched, and it raises a condition',
};

/** How much a host (or one of its resources) lets Datum do: agent.yaml's reconciliation.mode. */
export const MODES = ['observe', 'enforce'] as const;
export type Mode = (typeof MODES)[number];
export const MODE_MEANINGS: Record<Mode, string> = {
  observe: 'report drift with the plan an enforce pass would run, and apply nothing (the default)',
  enforce: 'repair managed drift with authorized, idempotent actions',
};

export const RESOURCE_TYPES = ['release', 'file', 'service', 'flag', 'directory', 'package', 'unit'] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];
export const RESOURCE_TYPE_MEANINGS: Record<ResourceType, string> = {
  release: 'an artifact unpacked to releases/<version>, with the current link pointing at it',
  file: 'a file under the node root, observed by the sha256 of its bytes (and its mode, owner and group where declared)',
  service: "a process on the current release, observed by its own health endpoint's build and config digest",
  flag: 'a JSON value at flags/<name>.json',
  directory: 'a directory under the node root, observed by whether it is there and its declared mode, owner and group',
  package: "a Debian package at an exact version, observed in dpkg's own database",
  unit: "a systemd unit, observed from its manager: Datum's unit file or drop-in, enabled and active state, declared properties, and whether its main process started after its content was written",
};

/** What an authorized action does. */
export const ACTIONS = [
  'release.install',
  'file.write',
  'file.attributes',
  'service.start',
  'service.restart',
  'flag.write',
  'directory.ensure',
  'package.install',
  'unit.apply',
] as const;
export type ActionKind = (typeof ACTIONS)[number];
export const ACTION_MEANINGS: Record<ActionKind, string> = {
  'release.install': 'fetch the artifact, verify its sha256, unpack it and switch current, each step atomic',
  'file.write': 'write the file atomically, keeping the replaced content under .datum/backup/',
  'file.attributes': "set a file's declared mode, owner and group in place, its content unchanged",
  'service.start': 'start the service on current with its config',
  'service.restart': 'restart the service on current with its config',
  'flag.write': "write the flag's value",
  'directory.ensure': 'create the directory when it is absent, and set its declared mode, owner and group',
  'package.install':
    "install the exact version with dpkg: a .deb artifact whose sha256 and control fields verify, or from the host's apt sources",
  'unit.apply':
    "write Datum's unit file or drop-in atomically (the replaced bytes kept under .datum/backup/), reload the manager, enable, then start or restart the unit until its main process started after its content was written",
};

/**
 * Actions a provider declares destructive; no repair ever authorizes them and the agent's apply
 * refuses them. Only an approved planned removal (a work item) removes anything, and only of
 * REMOVABLE_TYPES, on a host whose agent.yaml allows that type (allow.destructive).
 */
export const DESTRUCTIVE_ACTIONS = [
  'release.delete',
  'file.delete',
  'flag.delete',
  'service.kill',
  'directory.delete',
  'package.remove',
  'unit.delete',
  'unit.disable',
  'unit.stop',
] as const;
export type DestructiveActionKind = (typeof DESTRUCTIVE_ACTIONS)[number];
export const DESTRUCTIVE_ACTION_MEANINGS: Record<DestructiveActionKind, string> = {
  'release.delete': 'delete a release directory',
  'file.delete': 'delete a file',
  'flag.delete': 'delete a flag',
  'service.kill': 'kill a service without starting it again',
  'directory.delete': 'delete a directory',
  'package.remove': 'remove (or purge) a package, or another package that stands in its way',
  'unit.delete': "delete a unit file or drop-in (Datum's or anyone's)",
  'unit.disable': 'disable a unit',
  'unit.stop': 'stop a unit without starting it again',
};

/** The types whose planned removal the agent carries out once approved (agent.yaml allow.destructive). */
export const REMOVABLE_TYPES = ['file', 'flag'] as const;
export type RemovableType = (typeof REMOVABLE_TYPES)[number];

/** What became of an action the agent was sent (execution evidence, never proof of convergence). */
export const EXECUTION_OUTCOMES = ['applied', 'replayed', 'refused', 'failed', 'skipped'] as const;
export type ExecutionOutcome = (typeof EXECUTION_OUTCOMES)[number];
export const EXECUTION_OUTCOME_MEANINGS: Record<ExecutionOutcome, string> = {
  applied: 'the agent wrote it',
  replayed: "answered from the agent's journal: the same idempotency key was applied before",
  refused: "the agent's typed no (a REFUSALS failure type); nothing was written",
  failed: 'the write was tried and did not complete',
  skipped: 'not attempted, because an earlier action of the same batch failed or was refused',
};

/** An operator decision the agent keeps per target across generations. */
export const OPERATOR_DECISION_KINDS = ['yield', 'conflict'] as const;
export type OperatorDecisionKind = (typeof OPERATOR_DECISION_KINDS)[number];
export const OPERATOR_DECISION_KIND_MEANINGS: Record<OperatorDecisionKind, string> = {
  yield: 'an operator left the target to the other writer: OPERATOR_OWNED while the spec is unchanged',
  conflict: 'another writer was seen: Datum does not write the target until an operator resolves it',
};

/** An operator's answer to a conflict (resolveConflict's `resolution`). */
export const RESOLUTIONS = ['retake', 'yield'] as const;
export type Resolution = (typeof RESOLUTIONS)[number];
export const RESOLUTION_MEANINGS: Record<Resolution, string> = {
  retake: 'Datum owns the resource again, with a fresh retry budget',
  yield: 'leave the resource to the other writer (OPERATOR_OWNED)',
};
