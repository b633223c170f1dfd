/*
 * Every patch Datum's workflows ask Temporal's `patched()` for, in one table. A reconcile loop
 * runs for weeks and replays its history on whatever code the worker runs now, so a change of
 * what a workflow decides or which commands it issues is asked as a patch: a run recorded before
 * it keeps the old branch up to where its history ends, and takes the new one from there.
 *
 * Each id is spelled once, below; every call site names it through WORKFLOW_PATCH, DECISION_RULE
 * or WATCH_RULE. Each entry says the release it came in, what it changes for a loop that was already running, which recorded histories
 * (test/histories/, replayed by test/workflow/replay.test.ts) take its old branch, and its stage.
 * The replay test checks the `histories` lists against what each history really asks.
 *
 * Retiring a patch (docs/production.md, "Upgrading"): it is deprecated, `deprecatePatch()` with the old branch
 * deleted (stage 'deprecated'), once no open run began before its release (`temporal workflow
 * list --query "ExecutionStatus='Running' AND StartTime < '<release date>'"` finds none: every
 * loop has continued as new or ended since) and none of its `histories` is still replayed (the
 * release that recorded them is no longer run by any fleet, and its directory is removed). It is
 * removed, call and entry, one release later, once no open run began before the deprecating one.
 */

/** The patches workflow code asks itself. */
export const WORKFLOW_PATCH = {
  openingPatchesFirst: 'opening-patches-first',
  storedOperatorDecisions: 'stored-operator-decisions',
  waitForValidDesiredState: 'wait-for-valid-desired-state',
  validRecheckClearsRejection: 'valid-recheck-clears-rejection',
  durableOperatorDecisions: 'durable-operator-decisions',
  ledgerSeqConflictMovesOn: 'ledger-seq-conflict-moves-on',
  rolloutCancelStopsStarting: 'rollout-cancel-stops-starting',
  memoNodeView: 'memo-node-view',
  workItems: 'work-items',
  rolloutCarryFromContinueAsNew: 'rollout-carry-from-continue-as-new',
  signalRequester: 'signal-requester',
  workItemConfirmsReports: 'work-item-confirms-reports',
  observationBound: 'observation-bound',
  nodeHolds: 'node-holds',
  rolloutHearsSettled: 'rollout-hears-settled',
  watchHandsBackObservation: 'watch-hands-back-observation',
  applyHandsBackProbe: 'apply-hands-back-probe',
  keepWakeTimer: 'keep-wake-timer',
  watchEndsAtResync: 'watch-ends-at-resync',
  rolloutWaitsOutStaleRetake: 'rollout-waits-out-stale-retake',
  rolloutWaitsOutReprobe: 'rollout-waits-out-reprobe',
} as const;

/**
 * Decision rules added after loops were already running: src/domain asks each through its `rules`
 * callback, only where it changes the outcome, and the workflow answers with patched().
 */
export const DECISION_RULE = {
  /** Datum's own write that did not take ends the repair record (the probe shows our marker). */
  ownIneffectiveWriteEndsProof: 'own-ineffective-write-ends-proof',
  /** The agent's answers (MARKER_MOVED, refusals) are judged even when a gate closed on the probe. */
  answersOutliveLostProbe: 'answers-outlive-lost-probe',
  /** Any write of this pass ends the repair record of its resource, whatever the probe says. */
  ownExecutedWriteEndsProof: 'own-executed-write-ends-proof',
  /** A note carries the last status only when that decision judged the note's generation and digest. */
  noteCarriesOnlyObservedStatus: 'note-carries-only-observed-status',
  /** Drift that appeared meanwhile, once a pass spent the retry budget, is BLOCKED, not RETRY. */
  retryOnlyWithinBudget: 'retry-only-within-budget',
  /** A yield about another value than desired state now writes stands until an operator decides (it ended as new intent). */
  yieldOutlivesNewValue: 'yield-outlives-new-value',
  /** A decision the agent holds from before values were kept is sent again, so it gains the value's digest. */
  decisionsCarryValue: 'decisions-carry-value',
  /** A snapshot stamped further ahead of the controller's clock than MAX_CLOCK_SKEW_MS is not fresh. */
  futureSnapshotIsStale: 'future-snapshot-is-stale',
  /** A target that drifts again after writer_repairs repairs within writer_horizon is CONFLICT, not new drift. */
  repeatedDriftIsWriter: 'repeated-drift-is-writer',
  /** policy.repair_deadline ends a repair episode that outlives it: BLOCKED, nothing more authorized. */
  repairDeadline: 'repair-deadline',
  /** A refusal older than an operator's reset of the node's fence is tried once more. */
  fenceResetRetriesRefused: 'fence-reset-retries-refused',
  /** A digest compared with the authority's only within one generation: a raised generation is no content change. */
  digestMismatchWithinGeneration: 'digest-mismatch-within-generation',
  /** A pass the node did not answer re-probes after policy.backoff, not at the next resync. */
  unreachableReprobesSoon: 'unreachable-reprobes-soon',
} as const;

/** The watch's rules (src/domain/watch.ts), asked and answered the same way. */
export const WATCH_RULE = {
  failureRetriesSoon: 'watch-failure-retries-soon',
} as const;

type ValueOf<T> = T[keyof T];
export type WorkflowPatch = ValueOf<typeof WORKFLOW_PATCH>;
export type DecisionRule = ValueOf<typeof DECISION_RULE>;
export type WatchRule = ValueOf<typeof WATCH_RULE>;
export type PatchId = WorkflowPatch | DecisionRule | WatchRule;

export interface PatchEntry {
  /**
   * The release that first asked it: the commit of a release fleets ran (the upgrade test's
   * PREVIOUS_RELEASE), or 'unreleased' until the next release is cut.
   */
  readonly since: string;
  /** What a loop that was running before `since` does differently once it runs this code. */
  readonly changes: string;
  /** Recorded histories (test/histories/<release>/<name>, without .json) whose replay asks it and takes the branch from before it. */
  readonly histories: readonly string[];
  /** 'patched': both branches kept; 'deprecated': deprecatePatch() and the new branch only (then no history may depend on it). */
  readonly stage: 'patched' | 'deprecated';
  /** Why it exists: what went wrong before it (kept here rather than at the call site). */
  readonly story: string;
}

/** The release running fleets have (test/production/upgrade.test.ts PREVIOUS_RELEASE). */
const FLEET_RELEASE = '875215a';
const UNRELEASED = 'unreleased';

/** Histories recorded by release 0.1.0, before any patch here existed. */
const H = (...names: string[]) => names.map((name) => `0.1.0/${name}`);
/** Every one of them: each opens a new run chain and writes its memo. */
const EVERY_0_1_0 = H(
  'conflict-then-yield',
  'controller-killed-mid-pass',
  'malformed-signals',
  'observe-then-enforce',
  'offline-stale-intent-handover',
  'probe4-retry-then-blocked',
  'worked-example-gen11-superseded',
  'worked-example-gen12',
);

export const PATCHES: Readonly<Record<PatchId, PatchEntry>> = {
  [WORKFLOW_PATCH.openingPatchesFirst]: {
    since: UNRELEASED,
    changes:
      'A new run chain asks stored-operator-decisions and wait-for-valid-desired-state before its first local activity, as one patch, instead of after readAuthority.',
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      "The two opening patches were asked right after readAuthority. A query arriving while that activity ran could make the server end the first workflow task with the activity's marker alone; the patch marker then landed in the next task, and every later replay asked patched() before it knew of that marker: non-determinism (test/adversarial/hostile-input).",
  },
  [WORKFLOW_PATCH.storedOperatorDecisions]: {
    since: FLEET_RELEASE,
    changes:
      'A new run chain reads the operator decisions the ledger store kept for the node (one more local activity at the start) instead of starting from an empty history.',
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      'A node that lost its own record under .datum/ lost its yields and open conflicts with it, and the next generation could overwrite a yielded target.',
  },
  [WORKFLOW_PATCH.waitForValidDesiredState]: {
    since: FLEET_RELEASE,
    changes:
      'A loop started on desired state that does not validate shows BLOCKED/INVALID_DESIRED_STATE and reads the file again every 30 s instead of failing at once.',
    histories: H(),
    stage: 'patched',
    story:
      'A hand-over whose successor found the file broken meanwhile failed the successor: outside input ended a loop, which the design forbids.',
  },
  [WORKFLOW_PATCH.validRecheckClearsRejection]: {
    since: FLEET_RELEASE,
    changes: 'A valid recheck closes the INVALID_SIGNAL an earlier malformed recheck raised.',
    histories: H(),
    stage: 'patched',
    story: 'A malformed recheck left INVALID_SIGNAL open for good: no valid recheck cleared it.',
  },
  [WORKFLOW_PATCH.durableOperatorDecisions]: {
    since: FLEET_RELEASE,
    changes: 'Operator decisions (yields, open conflicts, retakes) are sent to the agent (recordDecision activities).',
    histories: H('conflict-then-yield'),
    stage: 'patched',
    story:
      'Yields and open conflicts lived only in the workflow: the agent could not refuse a write to a yielded target, and the next generation started without them (issue 10, docs/architecture.md §4).',
  },
  [WORKFLOW_PATCH.ledgerSeqConflictMovesOn]: {
    since: FLEET_RELEASE,
    changes:
      'A ledger entry the store refuses for a different entry under its seq is dropped from the queue instead of holding back every later one.',
    histories: H(),
    stage: 'patched',
    story: 'One real seq conflict held back every later entry of the chain from the fleet-wide store (found by npm run faults).',
  },
  [WATCH_RULE.failureRetriesSoon]: {
    since: UNRELEASED,
    changes:
      'A watch that ends without a change while the loop waits is started again: at once after its window or its agent shut down, within 30 s after a failure, instead of at the next pass.',
    histories: H('offline-stale-intent-handover'),
    stage: 'patched',
    story:
      "A watch lost to a missed heartbeat or an agent restart left the node unwatched until its next pass: the 1000-node cluster bench missed a file edit for a whole 10 minute resync that way (B-0793's history).",
  },
  [WORKFLOW_PATCH.rolloutCancelStopsStarting]: {
    since: UNRELEASED,
    changes:
      'A rollout prepares nodes 25 at a time, 8 batches at once, and starts no batch once cancelled, instead of 100 at a time with no stop.',
    histories: H(),
    stage: 'patched',
    story: '`datum rollout cancel` could not stop a rollout from starting the nodes it had not reached yet.',
  },
  [WORKFLOW_PATCH.memoNodeView]: {
    since: UNRELEASED,
    changes:
      'The memo carries reason, since and last_verified_at next to the summary, and a steady pass moves last_verified_at at most every 5 minutes.',
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      '`datum nodes` (issue 12) reads reason, since and last verification from the workflow list alone; the memo held the summary line only.',
  },
  [WORKFLOW_PATCH.workItems]: {
    since: UNRELEASED,
    changes:
      "Asked once as each run starts. In force, the loop reports each recorded pass that has, or had, a condition needing judgement to the node's work items (a local activity that opens or tells them; docs/work-items.md), a new run chain first finds the node's open items an earlier loop opened, and the items it tells are carried across continue-as-new. A run that began before it reports nothing until it continues as new.",
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      "A condition that needs judgement was only a flag, a status line and an alert: a notification nobody had to take up (issue 20, seed 004 P5). Asked at the run's start, before any local activity, so no workflow task can end between an activity's marker and this one's (see opening-patches-first).",
  },
  [WORKFLOW_PATCH.rolloutCarryFromContinueAsNew]: {
    since: UNRELEASED,
    changes:
      'A rollout started directly with `prepared` in its input fails (InvalidWorkflowInput) instead of skipping preparation; one continued as new still takes its carry.',
    histories: H(),
    stage: 'patched',
    story:
      "A caller-supplied `prepared` skipped preparation and reported any node CONVERGED from another loop's state (issue 18, hole 9; test/adversarial/forged-prepared).",
  },
  [WORKFLOW_PATCH.signalRequester]: {
    since: UNRELEASED,
    changes:
      "Before handling an operator's signal or Update (resolveConflict, refreshDesired, a rejected recheck), the loop reads the identity Temporal recorded for it (one local activity) and records it on the notes it writes (`requester`).",
    histories: H('conflict-then-yield', 'malformed-signals', 'offline-stale-intent-handover', 'worked-example-gen11-superseded'),
    stage: 'patched',
    story:
      'The ledger recorded only the self-declared `by` of a resolution: anyone with access to the namespace could resolve a conflict as anyone (issue 18, "who resolved"). Work items already kept the identity of their Updates.',
  },
  [WORKFLOW_PATCH.workItemConfirmsReports]: {
    since: UNRELEASED,
    changes:
      "Asked once as each work item's run starts. In force, the item takes a report (its opening one included) only once its loop or the ledger store confirmed it (one activity per report), drops and counts one that is not, and binds a resolution to the episode its resolver judged. A run that began before it takes reports as they come until it continues as new.",
    histories: H(),
    stage: 'patched',
    story:
      'Anyone with a namespace credential could signal a forged report that closed an item "by a fresh observation" that never happened, or pointed its resolutions at another node\'s loop (issue 30, class 3; test/adversarial/forged-report).',
  },
  [WORKFLOW_PATCH.observationBound]: {
    since: UNRELEASED,
    changes:
      "Asked once as each run starts. In force, an observation that has not come back within the policy's node_timeout plus observation_ttl fails at once (the observe's schedule-to-close timeout) and the pass decides BLOCKED/NODE_UNREACHABLE, instead of waiting for three attempts of a minute each.",
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      'An observe picked up by an agent that never returned, with the agent still beating, held a loop at its last CONVERGED for more than three minutes while a drift there went unrepaired and `datum status` did not name it (issue 32).',
  },
  [WORKFLOW_PATCH.nodeHolds]: {
    since: UNRELEASED,
    changes:
      "Asked once as each run starts. In force, the loop takes the hold and unhold Updates (`datum hold`, `datum unhold`), a held loop authorizes nothing (DRIFTED/HELD, DRIFT_HELD) and records the hold on every entry, and a new run chain reads the node's hold from the ledger store (one more local activity). A run that began before it refuses both Updates until it continues as new.",
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      "There was no central, recorded stop of repairs: an operator who needed Datum's hands off a node had to switch its agent.yaml to observe on the node itself (issue 32).",
  },
  [WORKFLOW_PATCH.rolloutHearsSettled]: {
    since: UNRELEASED,
    changes:
      'A rollout starts its loops with report_to and waits for their nodeSettled signals, reading the state of a node that told it, and of the others every poll_seconds (15 by default), instead of every second.',
    histories: H(),
    stage: 'patched',
    story:
      "A rollout read every node's state each second: one visibility list and a query per settled node per second, for as long as the rollout ran (issue 33, item 3).",
  },
  [WORKFLOW_PATCH.watchHandsBackObservation]: {
    since: UNRELEASED,
    changes:
      'Asked once as each run starts. In force, each watch asks its agent to observe the node once it sees a change (WatchRequest.observe_on_change), and the pass that change wakes decides on that snapshot, when it is at most half of observation_ttl old and the loop saw nothing else while the watch ran, instead of scheduling an observe of its own: one activity and one workflow task fewer per drift. A run that began before it observes for itself until it continues as new.',
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      'A watch only said that something changed; the pass it woke then sent an observe to the same agent and waited for it in a workflow task of its own, which is most of a drift pass past the ceiling (issue 33, item 2).',
  },
  [WORKFLOW_PATCH.applyHandsBackProbe]: {
    since: UNRELEASED,
    changes:
      "Asked once as each run starts. In force, a pass's last action asks its agent to observe the node once it is carried out (ApplyRequest.probe_after), and the pass judges that snapshot as its post-action probe, when it is at most half of observation_ttl old, instead of scheduling an observe of its own: one activity and one workflow task fewer per pass that acts. A refused or failed action, or an agent from before this, leaves the pass to probe as before. A run that began before it probes for itself until it continues as new.",
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      'Every pass that acted sent the probe as an activity of its own to the agent that had just carried out the action, and waited a workflow task for it: six events of a drift pass past what its evidence needs (issue 33, item 2).',
  },
  [WORKFLOW_PATCH.keepWakeTimer]: {
    since: UNRELEASED,
    changes:
      "Asked once as each run starts. In force, the loop keeps its wake timer across passes: a pass woken by evidence (a signal, the watch) that ends CONVERGED while a resync timer runs takes that timer's time as its recheck's not_before, and the wait keeps the timer that fires at the next wake instead of cancelling it and starting another. Resync becomes a cadence, resync_interval after the last resync rather than after every pass. A time the decision set itself (a backoff, a retake, a hold's end) still gets a timer of its own. A run that began before it cancels and restarts the timer until it continues as new.",
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      'Every pass woken by evidence cancelled the resync timer and started another, two history events per pass for the same wait (issue 33, item 2). A first version, patch keep-resync-timer (174b902, reverted in c1e41ef; the id is not reused, since runs recorded under it start the timer before the watch), kept the timer while the ledger still promised resync_interval after the pass, and started the timer before the watch, so a traced first pass ended before its watch.',
  },
  [WORKFLOW_PATCH.watchEndsAtResync]: {
    since: UNRELEASED,
    changes:
      "Asked once as each run starts; in force only with watch-hands-back-observation and keep-wake-timer. A watch started while the loop waits for its resync, within the watch's window of it, ends at the resync and observes the node there (WatchRequest.observe_at_end): the resync pass decides on that snapshot, with no timer and no observe of its own, and the next watch runs to the next resync. A watch that fails or ends early leaves the loop a timer for the rest of the wait, as before. A run that began before it keeps a resync timer and observes at it until it continues as new.",
    histories: EVERY_0_1_0,
    stage: 'patched',
    story:
      'A steady pass was a timer firing, an observe scheduled and awaited in a workflow task of its own, and a timer started again: 12 history events, while the watch the loop kept running beside it stood on the same node and could have read it (issue 33, item 2: at most 9 events a steady pass).',
  },
  [WORKFLOW_PATCH.rolloutWaitsOutStaleRetake]: {
    since: UNRELEASED,
    changes:
      "Asked only where it changes what a rollout counts: at a decision BLOCKED/STALE_OBSERVATION that is the loop's first or second stale snapshot in a row (STALE_RETAKES_A_ROLLOUT_WAITS). In force, the loop does not tell its rollout it settled, the rollout does not count it from its state, and a wave's gate counts it on its way until the gate's deadline: the loop re-takes the snapshot itself, and the rollout counts what that finds. A third in a row is counted BLOCKED as before. A run that began before it counts the first stale snapshot as the node's outcome.",
    histories: H(),
    stage: 'patched',
    story:
      'A fleet-wide rollout on a controller that fell behind ended with nodes BLOCKED/STALE_OBSERVATION (bench, dev, 1000 nodes: 126 of them) that their loops went on to converge by themselves seconds later: the rollout reported an outcome that was only the controller being late, its time left those nodes out, and a wave would have halted on them.',
  },
  [WORKFLOW_PATCH.rolloutWaitsOutReprobe]: {
    since: UNRELEASED,
    changes:
      "Asked only where it changes what a rollout counts: at a decision BLOCKED/NODE_UNREACHABLE whose recheck has a not_before, which the loop set to ask the node again by itself (rule unreachable-reprobes-soon, the first UNANSWERED_REPROBES passes in a row). In force, the loop does not tell its rollout it settled, the rollout does not count it from its state, and a wave's gate counts it on its way until the gate's deadline. A third in a row, which waits for the resync, is counted BLOCKED as before. A run that began before it counts the first unanswered pass as the node's outcome.",
    histories: H(),
    stage: 'patched',
    story:
      'An agent late under load (bench, cluster, 1000 nodes) is not a node gone: once its loop asks again within seconds (unreachable-reprobes-soon), a rollout that counted its first unanswered pass would report BLOCKED for a node that converges moments later, and a wave would halt on it, as it did for stale snapshots before rollout-waits-out-stale-retake.',
  },
  [DECISION_RULE.digestMismatchWithinGeneration]: {
    since: UNRELEASED,
    changes:
      "A loop whose authority moved to another generation says STALE_INTENT (or AUTHORITY_REGRESSED) only, instead of also opening INTENT_DIGEST_MISMATCH (and its work item) for the other generation's content.",
    histories: H('offline-stale-intent-handover'),
    stage: 'patched',
    story:
      "In the README's worked example (N-24 raised to generation 12), the generation-11 loop opened an INTENT_DIGEST_MISMATCH work item asking to raise the generation, which had been raised: a condition said more than the evidence showed (issue 32).",
  },
  [DECISION_RULE.unreachableReprobesSoon]: {
    since: UNRELEASED,
    changes:
      'Asked at a decision BLOCKED/NODE_UNREACHABLE that is the first or second pass in a row without an answer (UNANSWERED_REPROBES). In force, its recheck has a not_before: the loop asks the node again after policy.backoff for that many (5 s, then 10 s, on the defaults), never later than resync_interval, instead of at the next resync. A node still silent after that is asked at the resync, as before. A run that began before it waits for the resync every time.',
    histories: H('offline-stale-intent-handover'),
    stage: 'patched',
    story:
      "On the cluster at 1000 nodes (bench, 2026-12-07), a verification pass's slowest node had its observe time out under load: its loop decided BLOCKED/NODE_UNREACHABLE with no time of its own, so it waited for its resync and looked again 364 s later. An agent that was only late stayed blind for a whole resync_interval, and the pass took 475 s.",
  },
  [DECISION_RULE.ownIneffectiveWriteEndsProof]: {
    since: UNRELEASED,
    changes: "Datum's own write that did not take (the probe shows its own marker) ends the resource's repair record.",
    histories: H(),
    stage: 'patched',
    story:
      "The sequence properties found Datum taking its own ineffective write for another writer's and opening a false CONFLICT.",
  },
  [DECISION_RULE.answersOutliveLostProbe]: {
    since: UNRELEASED,
    changes: "The agent's answers (MARKER_MOVED, refusals) are judged even when a gate closed on the post-action probe.",
    histories: H(),
    stage: 'patched',
    story:
      "A compare-and-swap refusal followed by a lost probe was forgotten: the other writer's evidence never opened a conflict.",
  },
  [DECISION_RULE.ownExecutedWriteEndsProof]: {
    since: UNRELEASED,
    changes: 'Any write a pass carried out ends the repair record of its resource, whatever the probe says.',
    histories: H(),
    stage: 'patched',
    story:
      'An ineffective repair followed by a lost probe kept its old repair record, and the next pass read our own write as a CONFLICT.',
  },
  [DECISION_RULE.noteCarriesOnlyObservedStatus]: {
    since: UNRELEASED,
    changes:
      "A note (a signal handled, a resolution, a re-bind) recorded for a generation and digest the last decision did not judge says BLOCKED instead of copying that decision's status; the pass that follows decides.",
    histories: H(),
    stage: 'patched',
    story:
      'A refreshDesired that re-bound the same generation to new content recorded a REBOUND note copying the last status: the ledger showed CONVERGED for a digest nothing had observed (issue 20). The ledger auditor (src/domain/ledger-audit.ts) checks every ledger the tests write for it.',
  },
  [DECISION_RULE.retryOnlyWithinBudget]: {
    since: UNRELEASED,
    changes:
      'A pass whose repair took but spent the retry budget, while another resource drifted meanwhile, says BLOCKED/RETRY_BUDGET_EXHAUSTED for it instead of RETRY/DRIFT_DETECTED.',
    histories: H(),
    stage: 'patched',
    story:
      "The ladder's drifted-meanwhile rung had no budget check: it promised a RETRY the next pass then withheld (issue 20). The ledger auditor and the sequence properties hold every decision to RETRY only below retry_budget.",
  },
  [DECISION_RULE.yieldOutlivesNewValue]: {
    since: UNRELEASED,
    changes:
      'A yield stands when desired state writes another value to its target: the key is UNKNOWN until an operator retakes or yields again, instead of the yield ending as new intent.',
    histories: H(),
    stage: 'patched',
    story:
      'A spec re-spelled to the same bytes ended a yield, and any new value took the file back from the writer an operator had yielded it to (issue 18, hole 5; test/adversarial/respelled-yield).',
  },
  [DECISION_RULE.decisionsCarryValue]: {
    since: UNRELEASED,
    changes: "A decision the agent holds without the value's digest is sent to it again, so it gains the digest.",
    histories: H(),
    stage: 'patched',
    story: 'Decisions recorded before values were kept could only be compared by spec digest (issue 18, hole 5).',
  },
  [DECISION_RULE.futureSnapshotIsStale]: {
    since: UNRELEASED,
    changes:
      "A snapshot whose observed_at is more than 5 s ahead of the controller's clock is STALE_OBSERVATION (the agent's clock runs ahead) instead of fresh.",
    histories: H(),
    stage: 'patched',
    story:
      'An agent clock an hour ahead made its snapshots look fresh for an hour past observation_ttl, and the node CONVERGED from them (issue 18; test/adversarial/clock-ahead).',
  },
  [DECISION_RULE.repeatedDriftIsWriter]: {
    since: UNRELEASED,
    changes:
      'A target that drifts again after policy.writer_repairs repairs within policy.writer_horizon (defaults 3 and 24h) opens a CONFLICT (reason REPEATED_DRIFT) with the earlier repairs as evidence, instead of being repaired as new drift.',
    histories: H(),
    stage: 'patched',
    story:
      'A writer that flipped a managed file back more slowly than conflict_window was new drift every time, repaired with a fresh budget, forever (issue 18, hole 10b; test/adversarial/slow-writer).',
  },
  [DECISION_RULE.repairDeadline]: {
    since: UNRELEASED,
    changes:
      'Where desired state sets policy.repair_deadline, a repair episode that outlives it (or whose next retry would come after it) says BLOCKED/REPAIR_DEADLINE_EXCEEDED and authorizes nothing more, instead of RETRY until retry_budget is spent.',
    histories: H(),
    stage: 'patched',
    story:
      'A repair episode had a budget of attempts but none of time (seed 004: "a budget of attempts and time"): a long backoff kept a node retrying for as long as the attempts lasted (issue 20).',
  },
  [DECISION_RULE.fenceResetRetriesRefused]: {
    since: UNRELEASED,
    changes:
      "A standing refusal recorded before the last reset of the node's fence (the snapshot's fence_reset, which only agents of this release send) is tried once more, instead of waiting for its marker, mode or drift to change.",
    histories: H(),
    stage: 'patched',
    story:
      'A generation published by mistake (100000000 for 10) fenced the node; once `datum agent reset-fence` moved the fence back, the loop of the right generation kept its StaleGenerationRefusal standing, since nothing it compares (marker, mode, drift) had changed, and never wrote (issue 18).',
  },
};

/**
 * The workflow sink a replaying run reports an old branch through: which patch it asked and found
 * not in force. Only a run recorded before a patch does (a live run always takes the new branch),
 * so these calls are how the replay test and a worker see which patches loops still depend on.
 */
export const PATCH_SINK = 'datumPatches';

export type DatumPatchSinks = { [PATCH_SINK]: { oldBranch(patch: PatchId): void } };
