import type { z } from 'zod';
import { withFix } from '../../contract';
import { valueDigestOfAction, type AuthorizedAction, type IntentDigests, type ObservedResource } from '../../domain';
import { fileWriteSpec, observeFile } from '../providers/file';
import { observeFlag } from '../providers/flag';
import { observeRelease, releaseInstallSpec } from '../providers/release';
import { observeService } from '../providers/service';
import type { NodeContext } from '../providers/types';
import { AgentRefusal } from '../refusal';

/** The target's marker as observe reports it: one spelling for the snapshot and the check. */
export async function targetMarker(ctx: NodeContext, action: AuthorizedAction): Promise<string | null> {
  return (await targetNow(ctx, action)).marker;
}

/** The action's target as observe reads it now. */
export async function targetNow(ctx: NodeContext, action: AuthorizedAction): Promise<ObservedResource> {
  switch (action.action) {
    case 'file.write':
      return await observeFile(ctx, { path: specOf(action, fileWriteSpec).path });
    case 'flag.write':
      return await observeFlag(ctx, action.resource_key);
    case 'release.install':
      return await observeRelease(ctx, specOf(action, releaseInstallSpec));
    case 'service.start':
    case 'service.restart':
      return await observeService(ctx, action.resource_key);
    default:
      throw new AgentRefusal('InvalidAction', `${action.action} has no provider`);
  }
}

/** The action's spec as its provider reads it; a malformed one is refused, never guessed at. */
export function specOf<T>(action: AuthorizedAction, schema: z.ZodType<T>): T {
  const r = schema.safeParse(action.spec);
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => `${i.path.map(String).join('.') || '(spec)'}: ${i.message}`).join('; ');
  throw new AgentRefusal('InvalidAction', withFix(`its spec is malformed (${issues})`, 're-plan from the desired state'));
}

/** What the action writes, by spec and by value (computed here from its write spec, not taken on trust). */
export function writtenBy(action: AuthorizedAction): IntentDigests | null {
  return action.spec_digest
    ? { spec_digest: action.spec_digest, value_digest: valueDigestOfAction(action.action, action.spec) }
    : null;
}
