import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DESIRED_NAMESPACE, SIGNATURE_SUFFIX } from '../contract';
import { InvalidInputError, type DesiredState, type Problem } from '../domain';
import { signFix, trustedKeys } from '../agent/trust';
import { parseAgentConfigText } from '../schemas/documents';
import { SignatureProblem, verifySignature } from '../trust/sshsig';

/*
 * `datum validate`'s view of a desired-state file through its node's trust anchors: when the
 * fleet holds that node's agent.yaml (FLEET/agents/<node>.yaml) and it lists keys or requires
 * signatures, the file's .sig is checked as that host will check it, so an unsigned, badly signed
 * or expired file is caught in CI rather than refused on the node.
 */

export async function signatureProblems(
  file: string,
  text: string,
  intent: DesiredState,
  fleetDir: string | null,
): Promise<Problem[]> {
  if (fleetDir === null) return [];
  const agentFile = path.join(fleetDir, 'agents', `${intent.node}.yaml`);
  const shownAgent = `agents/${intent.node}.yaml`;
  let trust;
  try {
    trust = parseAgentConfigText(await fs.readFile(agentFile, 'utf8'), agentFile).trust;
  } catch (error) {
    // No agent.yaml in the fleet, or one that does not validate: its own report says so.
    if (error instanceof InvalidInputError || (error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  if (!trust.require && trust.desired.length === 0) return [];
  let signature: string;
  try {
    signature = await fs.readFile(`${file}${SIGNATURE_SUFFIX}`, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    if (!trust.require) return [];
    return [
      {
        field: '(file)',
        problem: `is not signed (no ${path.basename(file)}${SIGNATURE_SUFFIX}), and ${shownAgent} requires signed intent (trust.require): that host would refuse every apply of it`,
        fix: signFix(intent.node),
      },
    ];
  }
  try {
    verifySignature(
      Buffer.from(text, 'utf8'),
      signature,
      DESIRED_NAMESPACE,
      trustedKeys(trust.desired),
      `${shownAgent} trust.desired`,
    );
  } catch (error) {
    if (!(error instanceof SignatureProblem)) throw error;
    return [{ field: '(file)', problem: `${path.basename(file)}${SIGNATURE_SUFFIX}: ${error.problem}`, fix: error.fix }];
  }
  if (intent.expires !== undefined && Date.parse(intent.expires) <= Date.now())
    return [
      {
        field: 'expires',
        problem: `passed at ${intent.expires}: ${shownAgent}'s host does not act on it`,
        fix: `write a later expires, then sign it again (datum sign ${path.basename(file)})`,
      },
    ];
  return [];
}
