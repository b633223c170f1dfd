import { z } from 'zod';
import { withFix } from '../contract/fix';
import { DESIRED_NAMESPACE, OPERATOR_NAMESPACE } from '../contract/trust';
import { SignatureProblem, parsePublicKey } from '../trust/sshsig';

/*
 * agent.yaml's trust anchors (seed 001: the mode sits "alongside the trust settings"): the public
 * keys whose signatures this host accepts for its desired state, and whether it requires them.
 * They live on the host and never in desired state, so the thing being controlled cannot change them (docs/configuration.md, "Trust anchors").
 */

/** More keys than any rotation needs; a list this long is a mistake. */
const MAX_KEYS = 32;

const keyLine = z
  .string({
    error: withFix('a trusted key is a line of text', 'write the key as its .pub file holds it: ssh-ed25519 AAAA… comment'),
  })
  .superRefine((line, ctx) => {
    try {
      parsePublicKey(line);
    } catch (error) {
      if (!(error instanceof SignatureProblem)) throw error;
      ctx.addIssue({ code: 'custom', message: error.message });
    }
  });

const keys = (what: string) =>
  z
    .array(keyLine, { error: withFix(`${what} is a list of public keys`, 'write one "ssh-ed25519 AAAA… comment" line per key') })
    .max(MAX_KEYS, withFix(`${what} lists more than ${MAX_KEYS} keys`, 'keep the keys in use; remove retired ones'))
    .default([]);

export const agentTrust = z
  .strictObject({
    desired: keys('trust.desired').describe(
      `Public keys (OpenSSH ssh-ed25519 lines) whose signatures this host accepts for its desired state: a detached signature desired/nodes/<node>.yaml.sig made with \`datum sign\` or \`ssh-keygen -Y sign -n ${DESIRED_NAMESPACE}\`. Several at once for rotation; a key removed here is refused from the next apply on.`,
    ),
    operators: keys('trust.operators').describe(
      `Public keys (OpenSSH ssh-ed25519 lines) of the operators whose signed decisions this host honours where it requires signatures: a retake, or the approval of a planned removal, signed with \`datum work resolve … --sign-key\` or \`ssh-keygen -Y sign -n ${OPERATOR_NAMESPACE}\` over the decision's statement. A decision that narrows (yield, hold, leave) needs none.`,
    ),
    require: z
      .boolean({
        error: withFix(
          'require must be true or false',
          'write require: true (an enforcing host acts only on signed intent) or require: false',
        ),
      })
      .default(false)
      .describe(
        'true: this host carries out an apply only when its desired-state document is signed by a key in trust.desired (and verifies that the action is one the document plans), and honours a decision that widens what it may write (a retake, an approved removal) only when a key in trust.operators signed it. false: unsigned intent and unsigned decisions are accepted; a signature that is sent is still verified.',
      ),
  })
  .default({ desired: [], operators: [], require: false })
  .superRefine((trust, ctx) => {
    if (trust.require && trust.desired.length === 0)
      ctx.addIssue({
        code: 'custom',
        path: ['desired'],
        message: withFix(
          'trust.require is true but trust.desired lists no key, so no desired state could ever be accepted',
          "list the public key(s) that sign this host's desired state (the .pub line of the key datum sign uses), or set require: false",
        ),
      });
  });
