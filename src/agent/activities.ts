import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { z } from 'zod';
import {
  ACTIONS,
  DESTRUCTIVE_ACTIONS,
  InvalidAgentConfig,
  authorizedAction,
  executionEvidence,
  observation,
  type AgentConfig,
  type AuthorizedAction,
  type ExecutionEvidence,
  type Json,
  type Observation,
  type ObservedResource,
  type ResourceSpec,
} from '../domain';
import { withFix, type AgentActivities, type ApplyRequest, type ObserveRequest } from '../contract';
import { effectiveMode, loadAgentConfig } from './config';
import { whileBeating } from './heartbeat';
import { AgentJournal, journalKey, withLock } from './journal';
import { countedApply } from './metrics';
import { realRoot } from './paths';
import { assertJournalRoom } from './retention';
import { applyFileWrite, fileWriteSpec, observeFile } from './providers/file';
import { applyFlagWrite, flagWriteSpec, observeFlag, undeclaredFlags } from './providers/flag';
import { applyReleaseInstall, observeRelease, releaseInstallSpec } from './providers/release';
import { applyServiceRun, observeService, serviceRunSpec } from './providers/service';
import type { ApplyResult, NodeContext } from './providers/types';
import { AgentRefusal, toFailure } from './refusal';
import { watchNode } from './watch';

/*
 * The node agent's two activities (task queue datum-node-<node>). Both re-read agent.yaml on
 * every call: the mode and the overrides are the operator's, and a change takes effect on the
 * next observation or action without restarting the agent.
 */

export function createAgentActivities(configPath: string): AgentActivities {
  const config = path.resolve(configPath);
  return {
    observe: (request) => whileBeating(() => observeNode(config, request)),
    apply: (request) => whileBeating(() => countedApply(request, () => applyAction(config, request))),
    watch: (request) => watchNode(config, request),
  };
}

const now = () => new Date();

// ---------------------------------------------------------------------------------------------
// observe

export async function observeNode(configPath: string, request: ObserveRequest): Promise<Observation> {
  // observed_at is the oldest reading in the snapshot: taken before anything is read, so a slow
  // probe makes the snapshot older, never younger, and observation_ttl judges it honestly.
  const observedAt = now();
  let config: AgentConfig;
  try {
    config = await loadAgentConfig(configPath);
  } catch (err) {
    if (!(err instanceof InvalidAgentConfig)) throw err;
    return observation.parse({
      node_id: request.node,
      observed_at: observedAt.toISOString(),
      heartbeat_at: now().toISOString(),
      mode: 'observe',
      resources: {},
      config_error: err.message,
    });
  }
  assertNode(config, request.node, configPath, `observe of node "${request.node}"`);
  const ctx: NodeContext = { node: config.node, root: await realRoot(config.root, false) };

  const keys = Object.keys(request.resources).sort();
  const seen = await Promise.all(keys.map((key) => observeResource(ctx, key, request.resources[key])));
  const resources: Record<string, ObservedResource> = {};
  keys.forEach((key, i) => (resources[key] = seen[i]));
  const undeclared = await undeclaredFlags(ctx, new Set(keys));

  return observation.parse({
    node_id: config.node,
    observed_at: observedAt.toISOString(),
    heartbeat_at: now().toISOString(),
    mode: config.reconciliation.mode,
    resource_modes: config.reconciliation.resources,
    overrides: config.overrides,
    resources,
    undeclared,
    config_error: null,
  });
}

async function observeResource(ctx: NodeContext, key: string, spec: ResourceSpec): Promise<ObservedResource> {
  switch (spec.type) {
    case 'file':
      return await observeFile(ctx, spec);
    case 'flag':
      return await observeFlag(ctx, key);
    case 'release':
      return await observeRelease(ctx, spec);
    case 'service':
      return await observeService(ctx, key);
    default: {
      const type = (spec as { type?: unknown }).type;
      throw ApplicationFailure.nonRetryable(
        `observe of "${key}": unknown resource type ${JSON.stringify(type)}`,
        'InvalidAction',
        { resource_key: key },
      );
    }
  }
}

function assertNode(config: AgentConfig, node: string, configPath: string, subject: string): void {
  if (config.node === node) return;
  throw ApplicationFailure.nonRetryable(
    withFix(
      `${subject} refused: this agent serves node "${config.node}" (${configPath}), not "${node}"`,
      `route work for "${node}" to task queue datum-node-${node}, or correct node: in ${configPath}`,
    ),
    'NodeMismatch',
    { node, agent_node: config.node },
  );
}

// ---------------------------------------------------------------------------------------------
// apply

export async function applyAction(configPath: string, request: ApplyRequest): Promise<ExecutionEvidence> {
  // One apply at a time per agent: the fence check, the action and the fence update are one step.
  return await withLock(configPath, () => applyLocked(configPath, request));
}

type Refuse = (type: AgentRefusal['type'], problem: string, fix: string, facts?: Record<string, Json>) => ApplicationFailure;

async function applyLocked(configPath: string, request: ApplyRequest): Promise<ExecutionEvidence> {
  const raw = request.action as Partial<AuthorizedAction> | undefined;
  const kind = typeof raw?.action === 'string' ? raw.action : '(no action)';
  const key = typeof raw?.resource_key === 'string' ? raw.resource_key : '(no resource)';
  const what = `${kind} of "${key}" on node ${request.node}`;
  const context: Record<string, Json> = {
    node: request.node,
    resource_key: key,
    action: kind,
    idempotency_key: raw?.idempotency_key ?? null,
  };
  const refuse: Refuse = (type, problem, fix, facts = {}) =>
    toFailure(new AgentRefusal(type, withFix(problem, fix), facts), what, context);

  // 1. The operator's configuration, read now.
  const config = await configForApply(configPath, refuse);
  // 2. The right node, and a well-formed action.
  assertNode(config, request.node, configPath, what);
  const parsed = authorizedAction.safeParse(request.action);
  if (!parsed.success)
    throw refuse(
      'InvalidAction',
      `the action is malformed (${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')})`,
      're-plan from the desired state',
    );
  const action = parsed.data;
  // 3–5. What this host's operator allows: mode, ownership, never destroy, known actions.
  for (const check of ACTION_CHECKS) {
    const refusal = check(config, action, configPath);
    if (refusal) throw refuse(refusal.type, refusal.problem, refusal.fix, refusal.facts);
  }
  try {
    return await fenceJournalAndAct(config, action, refuse);
  } catch (err) {
    // A provider, the fence or the journal found a path, an artifact or an obstruction it must
    // not touch: refused here, with the same subject as every other refusal.
    if (err instanceof AgentRefusal) throw toFailure(err, what, context);
    throw err;
  }
}

/** An agent that cannot read its own trust settings acts on nothing. */
async function configForApply(configPath: string, refuse: Refuse): Promise<AgentConfig> {
  try {
    return await loadAgentConfig(configPath);
  } catch (err) {
    if (!(err instanceof InvalidAgentConfig)) throw err;
    throw refuse(
      'InvalidAgentConfig',
      `agent.yaml is invalid, and an agent that cannot read its own trust settings acts on nothing:\n${err.message}`,
      `correct ${configPath}; the next action re-reads it`,
    );
  }
}

interface Refusal {
  type: AgentRefusal['type'];
  problem: string;
  fix: string;
  facts?: Record<string, Json>;
}

/** The agent's own refusals, in order, checked on every apply whatever the workflow decided. */
const ACTION_CHECKS: readonly ((config: AgentConfig, action: AuthorizedAction, configPath: string) => Refusal | null)[] = [
  // 3. Mode: observe on the host or on this resource means nothing is applied.
  (config, action, configPath) => {
    const mode = effectiveMode(config, action.resource_key);
    if (mode.mode !== 'observe') return null;
    const fix =
      'an operator on the node sets reconciliation.mode: enforce (and removes the per-resource observe) to let Datum repair it';
    return { type: 'ObserveModeRefusal', problem: `${mode.because} in ${configPath}`, fix, facts: { mode: 'observe' } };
  },
  // 4. Operator-owned: never reverted.
  (config, action, configPath) => {
    const override = config.overrides[action.resource_key];
    if (!override) return null;
    return {
      type: 'OperatorOwnedRefusal',
      problem: `"${action.resource_key}" is operator-owned (override approved by ${override.approved_by} since ${override.since}: ${override.reason})`,
      fix: `the operator removes overrides.${action.resource_key} from ${configPath} when Datum may manage it again`,
      facts: { override },
    };
  },
  // 5. Destructive or unknown action kinds.
  (_config, action) =>
    (DESTRUCTIVE_ACTIONS as readonly string[]).includes(action.action)
      ? {
          type: 'DestructiveActionRefusal',
          problem: `${action.action} is destructive and the agent never carries out destructive actions`,
          fix: 'an operator does this by hand if it is really wanted',
        }
      : null,
  (_config, action) =>
    (ACTIONS as readonly string[]).includes(action.action)
      ? null
      : {
          type: 'InvalidAction',
          problem: `"${action.action}" is not an action this agent knows (${ACTIONS.join(', ')})`,
          fix: 'upgrade the agent or the controller so both speak the same actions',
        },
];

async function fenceJournalAndAct(config: AgentConfig, action: AuthorizedAction, refuse: Refuse): Promise<ExecutionEvidence> {
  const ctx: NodeContext = { node: config.node, root: await realRoot(config.root, true) };
  const journal = new AgentJournal(ctx.root);
  // 6. Fencing: an older generation never undoes what a newer one did.
  const accepted = await journal.acceptedGeneration(action.resource_key);
  if (accepted !== null && action.desired_generation < accepted) {
    throw refuse(
      'StaleGenerationRefusal',
      `it is for generation ${action.desired_generation}, but this agent already accepted generation ${accepted} for "${action.resource_key}"`,
      `only the workflow of generation ${accepted} or newer may change "${action.resource_key}"; refresh the stale workflow's intent`,
      { desired_generation: action.desired_generation, accepted_generation: accepted },
    );
  }
  // 7. Idempotency: a recorded result is answered, not re-done.
  const recorded = await journal.lookup(journalKey(action));
  if (recorded) return executionEvidence.parse({ ...recorded.evidence, outcome: 'replayed' });

  const result = await carryOut(ctx, action);
  const executedAt = now();
  const evidence = executionEvidence.parse({
    resource_key: action.resource_key,
    action: action.action,
    idempotency_key: action.idempotency_key,
    outcome: 'applied',
    executed_at: executedAt.toISOString(),
    marker_after: result.marker_after,
    detail: result.detail,
    refusal: null,
  });
  await journal.record(action, evidence, executedAt);
  return evidence;
}

async function carryOut(ctx: NodeContext, action: AuthorizedAction): Promise<ApplyResult> {
  const spec = <T>(schema: z.ZodType<T>): T => {
    const r = schema.safeParse(action.spec);
    if (r.success) return r.data;
    const issues = r.error.issues.map((i) => `${i.path.map(String).join('.') || '(spec)'}: ${i.message}`).join('; ');
    throw new AgentRefusal('InvalidAction', withFix(`its spec is malformed (${issues})`, 're-plan from the desired state'));
  };
  // Only new actions reach here (a replay is answered from the journal): room for its entry first.
  await assertJournalRoom(ctx.root, now());
  switch (action.action) {
    case 'file.write':
      return await applyFileWrite(ctx, action.resource_key, spec(fileWriteSpec), now);
    case 'flag.write':
      return await applyFlagWrite(ctx, action.resource_key, spec(flagWriteSpec), now);
    case 'release.install':
      return await applyReleaseInstall(ctx, action.resource_key, spec(releaseInstallSpec));
    case 'service.start':
    case 'service.restart':
      return await applyServiceRun(ctx, action.resource_key, action.action, spec(serviceRunSpec), now);
    default:
      throw new AgentRefusal('InvalidAction', `${action.action} has no provider`);
  }
}
