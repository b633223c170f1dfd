import type { Stats } from 'node:fs';
import { withFix } from '../../contract';
import { accountProblem, attributesOf, modeBits, modeProblem, modeText, type Attributes } from '../../domain/resources';
import type { Json } from '../../domain';
import type { Wanted } from '../fs';
import { AgentRefusal } from '../refusal';
import { accountAs, accountId } from '../users';

/*
 * The mode, owner and group a file or a directory declares, as observe reports them and as a
 * write sets them (src/domain/resources/attributes.ts has the rules, src/agent/fs/attributes.ts
 * the held-descriptor changes).
 */

/** The declared attributes as this inode has them, each in the spelling declared (a name or an id). */
export async function observedAttributes(declared: Attributes, st: Pick<Stats, 'mode' | 'uid' | 'gid'>): Promise<Attributes> {
  const out: Attributes = {};
  if (declared.mode !== undefined) out.mode = modeText(st.mode);
  if (declared.owner !== undefined) out.owner = await accountAs('passwd', declared.owner, st.uid);
  if (declared.group !== undefined) out.group = await accountAs('group', declared.group, st.gid);
  return out;
}

/**
 * What an action's write spec asks to set: the mode judged by the same rule desired state is
 * (a forged action asking a setuid file is refused here, whatever the controller let through),
 * owner and group resolved to ids afresh.
 */
export async function wantedOf(
  type: 'file' | 'directory',
  spec: { readonly [field: string]: Json | undefined },
  subject: string,
): Promise<Wanted> {
  const declared = attributesOf(spec);
  const want: Wanted = {};
  if (declared.mode !== undefined) {
    const problem = modeProblem(type, declared.mode);
    if (problem)
      throw new AgentRefusal(
        'InvalidAction',
        withFix(
          `${subject} asks ${problem}`,
          type === 'file' ? 'declare the permission bits only, such as "0755"' : 'declare setgid or sticky only, such as "2775"',
        ),
        { mode: declared.mode },
      );
    want.mode = modeBits(declared.mode);
  }
  for (const what of ['owner', 'group'] as const) {
    const problem = declared[what] === undefined ? null : accountProblem(what, declared[what]);
    // Judged before getent sees it: a spelling of ours is never read as one of its options.
    if (problem) throw new AgentRefusal('InvalidAction', withFix(`${subject}: ${problem}`, 're-plan from the desired state'));
  }
  if (declared.owner !== undefined) want.uid = await accountId('passwd', declared.owner);
  if (declared.group !== undefined) want.gid = await accountId('group', declared.group);
  return want;
}
