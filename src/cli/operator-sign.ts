import { OPERATOR_NAMESPACE, withFix, type OperatorSignature, type WorkItem } from '../contract';
import { statementText, type DecisionStatement } from '../trust/statement';
import { sshKeygenSign } from './commands/sign';

/*
 * `--sign-key`: an operator signs the decision it sends (docs/security.md, "Operator signatures")
 * through ssh-keygen, as `datum sign` does, so Datum never holds the key. What is signed is the
 * canonical statement of exactly this decision (src/trust/statement.ts), standing for
 * SIGNED_FOR: a host that requires signatures refuses it for anything else, or later.
 */

/** How long a signed decision stands: long enough to reach the node, short enough not to be replayed. */
export const SIGNED_FOR_MS = 10 * 60 * 1000;

/** Signs `statement` with the private key at `key`. */
export async function signDecision(key: string, statement: DecisionStatement): Promise<OperatorSignature> {
  const text = statementText(statement);
  return { statement: text, signature: await sshKeygenSign(key, Buffer.from(text, 'utf8'), OPERATOR_NAMESPACE) };
}

const expiry = (now: Date) => new Date(now.getTime() + SIGNED_FOR_MS).toISOString();

/** A retake of `resourceKey` on `node` by `by`, as the node's agent states it. */
export const retakeStatement = (node: string, resourceKey: string, by: string, now = new Date()): DecisionStatement => ({
  node,
  decision: 'retake',
  subject: resourceKey,
  targets: [],
  by,
  expires: expiry(now),
});

/** The statement a work item's resolution is signed with: a retake of its resource, or the approval of its plan. */
export function itemStatement(item: WorkItem, resolution: string, by: string, now = new Date()): DecisionStatement {
  if (resolution === 'retake' && item.resource_key !== null) return retakeStatement(item.node, item.resource_key, by, now);
  if (resolution === 'approve' && item.removal)
    return {
      node: item.node,
      decision: 'approve',
      subject: item.id,
      targets: item.removal.targets.map((t) => ({ target: t.target, sha256: t.sha256 })),
      by,
      expires: expiry(now),
    };
  throw new Error(
    withFix(
      `${item.id}: a ${resolution} is not a decision a host checks an operator signature for (only retake, and approve of a planned removal)`,
      'leave out --sign-key',
    ),
  );
}
