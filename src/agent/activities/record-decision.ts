import { z } from 'zod';
import { InvalidAgentConfig, namesTarget, targetNameProblem, type RecordDecisionRequest } from '../../domain';
import { withFix, type DecisionAuthor, type RecordDecisionResult } from '../../contract';
import { recordDecisionAt } from '../node/claims';
import { loadAgentConfig } from '../config';
import { AgentJournal } from '../node/journal';
import { realRoot } from '../fs';
import { AgentRefusal, toFailure } from '../refusal';
import { assertNode } from './assert-node';
import { staleGeneration } from './write-checks';
import { decisionAuthor } from '../trust';
import type { AgentConfig } from '../../schemas';

const now = () => new Date();

/**
 * Keeps an operator decision per target on the node, so it outlives the workflow that made it
 * (docs/architecture.md §4 "Targets and operator decisions"). A malformed request changes nothing.
 */
export async function recordDecision(configPath: string, request: RecordDecisionRequest): Promise<RecordDecisionResult> {
  const subject = `recordDecision of ${JSON.stringify(request?.kind)} for "${request?.resource_key}" on node ${request?.node}`;
  let config: AgentConfig;
  try {
    config = await loadAgentConfig(configPath);
  } catch (err) {
    if (!(err instanceof InvalidAgentConfig)) throw err;
    throw toFailure(new AgentRefusal('InvalidAgentConfig', err.message), subject, {});
  }
  assertNode(config, request.node, configPath, subject);
  const parsed = recordDecisionRequest.safeParse(request);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(request)'}: ${i.message}`).join('; ');
    throw toFailure(
      new AgentRefusal('InvalidAction', withFix(`the request is malformed (${issues})`, 'send what decisionRequest() builds')),
      subject,
      {},
    );
  }
  const author = retakeAuthor(config, parsed.data, request.operator, subject);
  const root = await realRoot(config.root, true);
  const { operator: _signed, ...decision } = { ...parsed.data, node: request.node };
  try {
    // Fenced like an apply, inside the records' lock: a decision of a generation below the
    // node's fence would give back what a newer generation's write had ended.
    const holds = await recordDecisionAt(root, decision, () => admitDecision(root, config.node, decision));
    return { target: parsed.data.target, holds, ...(author ? { author } : {}) };
  } catch (err) {
    if (err instanceof AgentRefusal) throw toFailure(err, subject, { generation: decision.generation });
    throw err;
  }
}

/**
 * A retake lets Datum write a target again that it had left to another writer: on a host that
 * requires signatures, only an operator's signed retake (src/agent/trust.ts decisionAuthor). A
 * yield or a conflict narrows what the host writes and needs none.
 */
function retakeAuthor(
  config: AgentConfig,
  request: z.infer<typeof recordDecisionRequest>,
  signed: unknown,
  subject: string,
): DecisionAuthor | null {
  if (request.kind !== 'retake') return null;
  const wanted = { node: config.node, decision: 'retake' as const, subject: request.resource_key, targets: [], by: request.by };
  const judged = decisionAuthor(config, wanted, signed, null, now());
  if ('author' in judged) return judged.author;
  const { type, problem, fix, facts } = judged.refusal;
  throw toFailure(new AgentRefusal(type, withFix(problem, fix), facts), subject, { generation: request.generation });
}

/** Per-node fencing of a decision, as of an apply: refused below the fence, else its generation is accepted. */
async function admitDecision(root: string, node: string, request: RecordDecisionRequest): Promise<void> {
  const journal = new AgentJournal(root);
  const refusal = staleGeneration(request.generation, await journal.acceptedGeneration(), node);
  if (refusal) throw new AgentRefusal(refusal.type, withFix(refusal.problem, refusal.fix), refusal.facts);
  await journal.advance(request.generation, 'decision', now(), request.resource_key);
}

const recordDecisionRequest = z.object({
  node: z.string(),
  resource_key: z.string().min(1),
  target: z
    .string()
    .refine(
      (t) => namesTarget(t) && targetNameProblem(t) === null,
      'is not a target (file:<path>, flag:<name>, release:current, service:<key>, package:<name>)',
    ),
  kind: z.enum(['yield', 'conflict', 'retake']),
  spec_digest: z.string().min(1),
  // Optional: a loop from before values were kept sends none.
  value_digest: z.string().min(1).nullable().default(null),
  generation: z.number().int().min(1),
  by: z.string().min(1),
  at: z.iso.datetime({ offset: true }),
  note: z.string().nullable(),
  sequence: z.array(z.object({ at: z.string(), value: z.json(), marker: z.string().nullable(), source: z.string() })).max(10),
  // An operator's signed retake (checked by retakeAuthor, never kept on the node).
  operator: z.unknown().optional(),
});
