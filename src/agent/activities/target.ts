import { valueDigestOfAction, type AuthorizedAction, type IntentDigests, type ObservedResource } from '../../domain';
import { providerOfAction, type NodeContext } from '../providers';
import { AgentRefusal } from '../refusal';

/** The target's marker as observe reports it: one spelling for the snapshot and the check. */
export async function targetMarker(ctx: NodeContext, action: AuthorizedAction): Promise<string | null> {
  return (await targetNow(ctx, action)).marker;
}

/** The action's target as its provider's observe reads it now. */
export async function targetNow(ctx: NodeContext, action: AuthorizedAction): Promise<ObservedResource> {
  const provider = providerOfAction(action.action);
  if (provider === null) throw new AgentRefusal('InvalidAction', `${action.action} has no provider`);
  return await provider.targetNow(ctx, action);
}

/** What the action writes, by spec and by value (computed here from its write spec, not taken on trust). */
export function writtenBy(action: AuthorizedAction): IntentDigests | null {
  return action.spec_digest
    ? { spec_digest: action.spec_digest, value_digest: valueDigestOfAction(action.action, action.spec) }
    : null;
}
