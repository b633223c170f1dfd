import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DESIRED_NAMESPACE, SIGNATURE_SUFFIX } from '../../contract';
import { InvalidInputError } from '../../domain';
import { parseDesiredStateText } from '../../schemas/documents';
import { SignatureProblem, parsePublicKey, parseSignature, verifySignature } from '../../trust/sshsig';
import { outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withFix } from '../errors';
import { print, printDocument } from '../output';
import type { CommandModule } from '../command';

/*
 * `datum sign FILE --key KEY`: the desired-state author's detached signature over a node's file
 * (docs/security.md, "Trust anchors"). ssh-keygen makes it, with the author's own key (a
 * passphrase, an ssh-agent or a token work as they do for git): Datum holds no private key and
 * writes no cryptography. What it adds is the checks around it: the file validates as the node's
 * desired state before it is signed, the exact bytes validated are the bytes signed, and the
 * signature is verified as a trust-requiring host will verify it before FILE.sig is written.
 */

interface SignRaw extends OutputFlags {
  file: string;
  key: string;
}

export interface SignInput {
  file: string;
  key: string;
  format: OutputFormat;
}

export interface SignReport {
  file: string;
  signature_file: string;
  node: string;
  generation: number;
  expires: string | null;
  signer: string;
  signer_comment: string;
}

export const signCommand: CommandModule<SignRaw, SignInput> = {
  input(values) {
    return { file: values.file, key: values.key, format: outputFormat(values) };
  },
  async run({ file, key, format }) {
    const report = await sign(file, key);
    if (format !== 'text') printDocument(format, report);
    else
      print(
        `signed ${report.file} (node ${report.node}, generation ${report.generation}${report.expires ? `, expires ${report.expires}` : ''}) with ${report.signer} ${report.signer_comment}: ${report.signature_file}`.trimEnd(),
      );
    return 0;
  },
};

/** Signs `file` with `key`; writes FILE.sig only once the signature verifies over the bytes that validated. */
export async function sign(file: string, key: string): Promise<SignReport> {
  const bytes = await fs.readFile(file);
  const text = bytes.toString('utf8');
  if (!Buffer.from(text, 'utf8').equals(bytes))
    throw new Error(
      withFix(`${file} is not UTF-8 text, and a signed document travels to the node as its text`, 'save it as UTF-8'),
    );
  const node = path.basename(file).replace(/\.ya?ml$/, '');
  let intent;
  try {
    intent = parseDesiredStateText(text, file, { revision: 'unsigned', author: null, loaded_at: '' }, node);
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    throw new Error(`${error.message}\nnothing was signed`, { cause: error });
  }
  const signature = await sshKeygenSign(key, bytes);
  let signer;
  try {
    // Checked as the host checks it, against the key that made it: the algorithm and namespace a
    // host accepts, over exactly these bytes. Whether a host trusts that key is its agent.yaml's say.
    const made = parsePublicKey(`ssh-ed25519 ${parseSignature(signature).signer.toString('base64')}`);
    signer = verifySignature(bytes, signature, DESIRED_NAMESPACE, [made], 'the signing key');
  } catch (error) {
    if (!(error instanceof SignatureProblem)) throw error;
    throw new Error(`${key} made a signature no Datum host accepts: ${error.message}\nnothing was written`, { cause: error });
  }
  const signatureFile = `${file}${SIGNATURE_SUFFIX}`;
  const temporary = `${signatureFile}.${process.pid}.tmp`;
  await fs.writeFile(temporary, signature, { mode: 0o644 });
  await fs.rename(temporary, signatureFile);
  const comment = (await fs.readFile(`${key}.pub`, 'utf8').catch(() => '')).trim().split(/\s+/).slice(2).join(' ');
  return {
    file,
    signature_file: signatureFile,
    node: intent.node,
    generation: intent.generation,
    expires: intent.expires ?? null,
    signer: signer.fingerprint,
    signer_comment: comment,
  };
}

/** `ssh-keygen -Y sign -n NAMESPACE -f KEY` over `bytes` on its standard input; the armored signature. */
export function sshKeygenSign(key: string, bytes: Buffer, namespace = DESIRED_NAMESPACE): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('ssh-keygen', ['-Y', 'sign', '-n', namespace, '-f', key], (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
      reject(
        new Error(
          missing
            ? withFix('ssh-keygen is not installed', 'install OpenSSH (apt-get install openssh-client), which Datum signs with')
            : withFix(
                `ssh-keygen could not sign with ${key}: ${stderr.trim() || error.message}`,
                'name an Ed25519 private key you can read (ssh-keygen -t ed25519 -f <file> makes one)',
              ),
        ),
      );
    });
    child.stdin?.end(bytes);
  });
}
