// Real OpenSSH keys and signatures for the trust-anchor tests: made with ssh-keygen, the standard
// tool `datum sign` stands in for, so what the tests verify is what an operator's tool writes.
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface SshKey {
  /** The private key file (no passphrase). */
  file: string;
  /** The public key line, as agent.yaml lists it: ssh-ed25519 AAAA… comment. */
  line: string;
  /** As ssh-keygen -l prints it: SHA256:… */
  fingerprint: string;
}

/** A new key pair of `type` (ed25519 unless a test wants another) under `dir`. */
export async function makeKey(dir: string, comment: string, type = 'ed25519'): Promise<SshKey> {
  await fs.mkdir(dir, { recursive: true });
  const file = path.join(dir, `${comment.replace(/[^A-Za-z0-9_-]/g, '_')}-${type}`);
  await run('ssh-keygen', ['-q', '-t', type, '-N', '', '-C', comment, '-f', file]);
  const line = (await fs.readFile(`${file}.pub`, 'utf8')).trim();
  const { stdout } = await run('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${file}.pub`]);
  return { file, line, fingerprint: stdout.split(/\s+/)[1] };
}

/** `ssh-keygen -Y sign -n <namespace> -f <key> <file>`: writes <file>.sig and returns it. */
export async function sshSign(key: SshKey, namespace: string, file: string): Promise<string> {
  await fs.rm(`${file}.sig`, { force: true });
  await run('ssh-keygen', ['-Y', 'sign', '-n', namespace, '-f', key.file, file]);
  return await fs.readFile(`${file}.sig`, 'utf8');
}

/** The signature ssh-keygen makes over `text` read from its standard input. */
export async function sshSignText(key: SshKey, namespace: string, text: string): Promise<string> {
  return await new Promise((resolve, reject) => {
    const child = execFile('ssh-keygen', ['-Y', 'sign', '-n', namespace, '-f', key.file], (error, stdout, stderr) =>
      error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout),
    );
    child.stdin?.end(text);
  });
}
