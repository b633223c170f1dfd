/*
 * What a loop is bound to: its start's input and carried state, checked before anything else; the
 * desired-state authority, read on the controller; the intent bound at start to exactly the
 * generation the loop was started for; and the operator decisions a new run chain starts from.
 */
import { isRolloutId } from './report-settled';
import { ApplicationFailure, log, proxyLocalActivities, sleep, workflowInfo } from '@temporalio/workflow';
import { desiredDigest, emptyHistory, type AuthorityView, type BoundIntent, type History } from '../domain';
import { echo } from '../domain/bounds';
import {
  CONTROL_PERMANENT_ERRORS,
  WORKFLOW_PATCH,
  withFix,
  type AuthorityRead,
  type ControlActivities,
  type ReconcileCarry,
  type ReconcileNodeInput,
  isNodeId,
} from '../contract';
import { showInvalidAtStart } from './attributes';
import { storedHold } from './holds';
import { inForce } from './patches';
import { summaryLine } from './summaries';

const control = proxyLocalActivities<ControlActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', maximumAttempts: 5, nonRetryableErrorTypes: [...CONTROL_PERMANENT_ERRORS] },
});

/** The desired-state authority's current view of the node, read on the controller. */
export function readAuthority(node: string): Promise<AuthorityRead> {
  return control.readAuthority.executeWithOptions({ summary: summaryLine(`read authority ${node}`) }, [node]);
}

export function authorityView(read: AuthorityRead): AuthorityView {
  return read.ok
    ? { ok: true, generation: read.intent.generation, digest: read.intent.digest }
    : { ok: false, error: read.error };
}

/** What a run opens with: carried by continue-as-new, or read and bound for a new run chain. */
export async function openIntent(
  input: ReconcileNodeInput,
  holdsLive: boolean,
): Promise<{ carry: ReconcileCarry | null; intent: BoundIntent; history: History }> {
  checkInput(input);
  const carry = trustedCarry(input);
  if (carry) return { carry, intent: carry.intent, history: carry.history };
  const opening = openingPatches();
  const intent = bindAtStart(await readValidAuthority(input, opening), input);
  const history = await freshHistory(input.node, opening);
  // A hold outlives the loop that took it: a new generation's loop starts held (holds.ts).
  const hold = holdsLive ? await storedHold(input.node) : null;
  return { carry, intent, history: hold ? { ...history, hold } : history };
}

/**
 * The patches a new run chain's opening depends on, asked before its first local activity (see
 * the registry for why); runs recorded before asked each where it is used.
 */
interface OpeningPatches {
  storedDecisions(): boolean;
  waitForValid(): boolean;
}

function openingPatches(): OpeningPatches {
  if (inForce(WORKFLOW_PATCH.openingPatchesFirst)) return { storedDecisions: () => true, waitForValid: () => true };
  return {
    storedDecisions: () => inForce(WORKFLOW_PATCH.storedOperatorDecisions),
    waitForValid: () => inForce(WORKFLOW_PATCH.waitForValidDesiredState),
  };
}

/**
 * A new run chain starts from the operator decisions (yields, open conflicts) the ledger store
 * kept for the node, so they hold even when the node lost its own record under .datum/. A store
 * that cannot answer leaves the agent's record as the only one.
 */
async function freshHistory(node: string, opening: OpeningPatches): Promise<History> {
  if (!opening.storedDecisions()) return emptyHistory();
  try {
    const stored_decisions = await control.storedDecisions.executeWithOptions(
      { summary: summaryLine(`stored operator decisions ${node}`) },
      [node],
    );
    return { ...emptyHistory(), stored_decisions };
  } catch (error) {
    log.warn('the ledger store did not answer for stored operator decisions; the agent keeps its own', {
      node,
      error: String(error),
    });
    return emptyHistory();
  }
}

/** A workflow start is outside input, checked before anything else. */
function checkInput(input: ReconcileNodeInput): void {
  const problems: string[] = [];
  if (!input || typeof input !== 'object') problems.push('input must be {"node": "<node>", "generation": <G>}');
  else {
    if (!isNodeId(input.node)) problems.push(`node ${echo(input.node)} is not a node name`);
    if (!Number.isInteger(input.generation) || input.generation < 1)
      problems.push(`generation ${echo(input.generation)} must be a whole number of 1 or more`);
    if (input.report_to !== undefined && !isRolloutId(input.report_to))
      problems.push(`report_to ${echo(input.report_to)} is not a rollout's id (datum-rollout/…): a loop tells only its rollout`);
  }
  if (problems.length > 0) {
    throw ApplicationFailure.nonRetryable(
      withFix(`reconcileNode input rejected: ${problems.join('; ')}`, 'start it with {"node": "N-24", "generation": 12}'),
      'InvalidWorkflowInput',
    );
  }
}

/**
 * Carried state is accepted only from continue-as-new of this same workflow (the server sets
 * continuedFromExecutionRunId for that and nothing a client can start), and only when the
 * carried intent is what its own digest says, for this node and generation. A plain start with
 * a `carry` field would otherwise inject resources, service commands included, under the
 * authority's provenance. Every pass still compares that digest with the authority before acting.
 */
function trustedCarry(input: ReconcileNodeInput): ReconcileCarry | null {
  const carry = input.carry;
  if (carry === undefined) return null;
  if (!workflowInfo().continuedFromExecutionRunId) {
    throw ApplicationFailure.nonRetryable(
      withFix(
        'reconcileNode input rejected: "carry" is handed over by continue-as-new of this workflow only, and this run was started directly',
        `start it with {"node": "${input.node}", "generation": ${input.generation}} and nothing else; Datum carries its own state`,
      ),
      'InvalidWorkflowInput',
    );
  }
  const intent = carry.intent;
  const digest = desiredDigest(intent.resources, intent.policy);
  if (intent.node !== input.node || intent.generation !== input.generation || digest !== intent.digest) {
    throw ApplicationFailure.nonRetryable(
      withFix(
        `reconcileNode carried state rejected: it holds ${intent.node} generation ${intent.generation} with content digest ${digest}, but claims ${input.node} generation ${input.generation} with ${intent.digest}`,
        `terminate this run and start datum/${input.node}/gen-${input.generation} again (datum rollout start --generation ${input.generation})`,
      ),
      'InvalidWorkflowInput',
    );
  }
  return carry;
}

/** How often a loop started on desired state that does not validate reads it again. */
const INVALID_AT_START_RETRY = '30s';

/**
 * A loop started while its desired-state file does not validate (a hand-over whose successor
 * finds the file broken meanwhile, or a direct start) does not fail: outside input never ends a
 * loop. It shows as BLOCKED with INVALID_DESIRED_STATE in visibility and reads the file again
 * until it validates. An unknown node or a wrong generation is a wrong start, not bad input: those
 * still fail.
 */
async function readValidAuthority(input: ReconcileNodeInput, opening: OpeningPatches): Promise<AuthorityRead> {
  for (let shown = false; ; shown = true) {
    const read = await readAuthority(input.node);
    if (read.ok || read.kind === 'unknown_node' || !opening.waitForValid()) return read;
    if (!shown) showInvalidAtStart(input, read.error);
    log.warn('desired state does not validate; reading it again', { node: input.node, error: read.error });
    await sleep(INVALID_AT_START_RETRY, { summary: 'wait for valid desired state' });
  }
}

/** A workflow is bound to the generation it was started for; the authority must hold exactly that. */
function bindAtStart(read: AuthorityRead, input: ReconcileNodeInput): BoundIntent {
  if (!read.ok) {
    throw ApplicationFailure.nonRetryable(read.error, read.kind === 'unknown_node' ? 'UnknownNode' : 'InvalidDesiredState');
  }
  if (read.intent.generation !== input.generation) {
    throw ApplicationFailure.nonRetryable(
      withFix(
        `the authority for ${input.node} is at generation ${read.intent.generation}, not ${input.generation}`,
        `start datum/${input.node}/gen-${read.intent.generation} (datum rollout start --generation ${read.intent.generation}), or commit generation ${input.generation}`,
      ),
      'GenerationNotAtAuthority',
    );
  }
  return read.intent;
}
