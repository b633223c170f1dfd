import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { DESIRED_NAMESPACE } from '../../src/contract';
import { parsePublicKey, verifySignature } from '../../src/trust/sshsig';
import { runDatum } from '../helpers/cli';
import { makeKey, type SshKey } from '../helpers/ssh-keys';

/*
 * `datum sign` as an author runs it (bin/datum.js in a child process): it signs a node's
 * desired-state file with the author's key through ssh-keygen, and writes FILE.sig only for a file
 * that validates and a signature a host would accept. The signature is checked both by OpenSSH's
 * own `ssh-keygen -Y verify` and by the verifier the agent runs.
 */

let dir: string;
let release: SshKey;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-sign-'));
  release = await makeKey(path.join(dir, 'keys'), 'release@ci');
  await fs.mkdir(path.join(dir, 'desired', 'nodes'), { recursive: true });
});
afterAll(async () => await fs.rm(dir, { recursive: true, force: true }));

async function desired(node: string, doc: Record<string, unknown> = {}, fleet = dir): Promise<string> {
  const file = path.join(fleet, 'desired', 'nodes', `${node}.yaml`);
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(
    file,
    stringify({ node, generation: 12, resources: { maintenance: { type: 'flag', value: true } }, ...doc }),
  );
  return file;
}

/** `ssh-keygen -Y verify` with an allowed_signers file naming `key` as release@ci. */
function opensshVerifies(key: SshKey, file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const signers = path.join(dir, 'allowed_signers');
    void fs.writeFile(signers, `release@ci ${key.line}\n`).then(() => {
      const child = execFile(
        'ssh-keygen',
        ['-Y', 'verify', '-f', signers, '-I', 'release@ci', '-n', DESIRED_NAMESPACE, '-s', `${file}.sig`],
        (error, stdout, stderr) => (error ? reject(new Error(stderr)) : resolve(stdout)),
      );
      void fs.readFile(file).then((bytes) => child.stdin?.end(bytes));
    });
  });
}

describe('datum sign', () => {
  it('writes FILE.sig, which ssh-keygen -Y verify and the agent both accept', async () => {
    const file = await desired('N-24', { expires: '2030-01-01T00:00:00Z' });
    const ran = await runDatum(['sign', file, '--key', release.file]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe(
      `signed ${file} (node N-24, generation 12, expires 2030-01-01T00:00:00.000Z) with ${release.fingerprint} release@ci: ${file}.sig\n`,
    );
    expect(await opensshVerifies(release, file)).toMatch(/Good "datum-desired" signature for release@ci/);
    const signer = verifySignature(
      await fs.readFile(file),
      await fs.readFile(`${file}.sig`, 'utf8'),
      DESIRED_NAMESPACE,
      [parsePublicKey(release.line)],
      'trust.desired',
    );
    expect(signer.fingerprint).toBe(release.fingerprint);
  });

  it('signs nothing that is not its node’s valid desired state', async () => {
    const file = await desired('N-25', { node: 'N-26' });
    const ran = await runDatum(['sign', file, '--key', release.file]);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/N-26[\s\S]*nothing was signed/);
    await expect(fs.stat(`${file}.sig`)).rejects.toThrow(/ENOENT/);
  });

  it('writes no signature a host would refuse: a key that is not Ed25519', async () => {
    const rsa = await makeKey(path.join(dir, 'keys'), 'old-rsa', 'rsa');
    const file = await desired('N-27');
    const ran = await runDatum(['sign', file, '--key', rsa.file, '--json']);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/made a signature no Datum host accepts: .*Datum accepts ssh-ed25519 keys only/);
    await expect(fs.stat(`${file}.sig`)).rejects.toThrow(/ENOENT/);
  });
});

describe('datum validate, for a node whose agent.yaml requires signed intent', () => {
  it('reports the file unsigned, then valid once signed, then badly signed once changed, and expired', async () => {
    const fleet = path.join(dir, 'fleet');
    await fs.mkdir(path.join(fleet, 'agents'), { recursive: true });
    const agent = { node: 'N-30', root: path.join(dir, 'root'), trust: { desired: [release.line], require: true } };
    await fs.writeFile(path.join(fleet, 'agents', 'N-30.yaml'), stringify(agent));
    const file = await desired('N-30', {}, fleet);
    const validate = () => runDatum(['validate', '--fleet', fleet]);

    const unsigned = await validate();
    expect(unsigned.code).toBe(1);
    expect(unsigned.stdout).toMatch(
      /N-30.yaml: \(file\): is not signed \(no N-30.yaml.sig\), and agents\/N-30.yaml requires signed intent \(trust.require\): that host would refuse every apply of it — fix: .*datum sign desired\/nodes\/N-30.yaml/,
    );
    expect((await runDatum(['sign', file, '--key', release.file])).code).toBe(0);
    expect(await validate()).toMatchObject({ code: 0 });

    await fs.appendFile(file, '# edited after signing\n');
    const changed = await validate();
    expect(changed.code).toBe(1);
    expect(changed.stdout).toMatch(/N-30.yaml.sig: the signature by .* does not match these bytes/);

    await desired('N-30', { expires: '2020-01-01T00:00:00Z' }, fleet);
    expect((await runDatum(['sign', file, '--key', release.file])).code).toBe(0);
    const expired = await validate();
    expect(expired.code).toBe(1);
    expect(expired.stdout).toMatch(/expires: passed at 2020-01-01T00:00:00.000Z: agents\/N-30.yaml's host does not act on it/);
  });
});
