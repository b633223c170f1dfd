// The cost of trust anchors (issue 31): how long a trust-requiring host spends verifying one apply
// (src/agent/trust.ts untrustedIntent: the SSH signature over the document's bytes, the document
// parsed and validated, and the action re-derived from its plan), next to the signature check alone,
// and what a widening operator decision costs the host (decisionAuthor: the operator's signature
// over the decision's statement, the statement read and compared with the decision).
// `npm run -s build && node bench/trust-verify.mjs [--runs 2000]`; prints medians and p99 in µs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const dist = path.join(path.dirname(path.dirname(new URL(import.meta.url).pathname)), 'dist', 'src');
const { decisionAuthor, untrustedIntent } = require(path.join(dist, 'agent', 'trust.js'));
const { statementText } = require(path.join(dist, 'trust', 'statement.js'));
const { parsePublicKey, verifySignature } = require(path.join(dist, 'trust', 'sshsig.js'));
const { desiredDigest, fileBytes, idempotencyKey } = require(path.join(dist, 'domain', 'index.js'));
const { parseDesiredStateText } = require(path.join(dist, 'schemas', 'documents.js'));

const { values } = parseArgs({ options: { runs: { type: 'string', default: '2000' } } });
const runs = Number(values.runs);

const dir = mkdtempSync(path.join(os.tmpdir(), 'datum-bench-trust-'));
try {
  const key = path.join(dir, 'release');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'release@ci', '-f', key]);
  const line = readFileSync(`${key}.pub`, 'utf8').trim();
  // The seed's worked example (N-24 generation 12): a release, a file, a service and a flag.
  const text = [
    'node: N-24',
    'generation: 12',
    'expires: 2099-01-01T00:00:00Z',
    'resources:',
    `  build: { type: release, version: "7.4", artifact: artifacts/app-7.4.tgz, sha256: "${'ab'.repeat(32)}" }`,
    '  config: { type: file, path: etc/app/config.json, content: { workers: 8 } }',
    '  app: { type: service, release: build, config: config, command: ["node", "server.js"] }',
    '  maintenance: { type: flag, value: false }',
    '',
  ].join('\n');
  const file = path.join(dir, 'N-24.yaml');
  writeFileSync(file, text);
  execFileSync('ssh-keygen', ['-Y', 'sign', '-n', 'datum-desired', '-f', key, file], { stdio: 'ignore' });
  const signed = { document: text, signature: readFileSync(`${file}.sig`, 'utf8') };

  const doc = parseDesiredStateText(text, 'N-24.yaml', { revision: 'r', author: null, loaded_at: '' });
  const digest = desiredDigest(doc.resources, doc.policy);
  const bytes = fileBytes({ workers: 8 });
  const sha256 = require('node:crypto').createHash('sha256').update(bytes).digest('hex');
  const action = {
    resource_key: 'config',
    action: 'file.write',
    desired_generation: 12,
    desired_digest: digest,
    idempotency_key: idempotencyKey('N-24', 'config', 12, digest),
    observed_marker: null,
    action_seq: 1,
    spec: { path: 'etc/app/config.json', content: bytes, sha256 },
    observed_at: new Date().toISOString(),
    observation_ttl: doc.policy.observation_ttl,
  };
  const retake = { node: 'N-24', decision: 'retake', subject: 'config', targets: [], by: 'alice' };
  const statement = statementText({ ...retake, expires: new Date(Date.now() + 30 * 60_000).toISOString() });
  const decision = {
    statement,
    signature: execFileSync('ssh-keygen', ['-Y', 'sign', '-n', 'datum-operator', '-f', key], {
      input: statement,
      stdio: ['pipe', 'pipe', 'ignore'],
    }).toString(),
  };
  const config = { node: 'N-24', trust: { desired: [line], operators: [line], require: true } };
  const author = decisionAuthor(config, retake, decision, null, new Date());
  if (!('author' in author)) throw new Error(`the bench's own retake is refused: ${author.refusal.problem}`);
  const refusal = untrustedIntent(config, signed, action, new Date());
  if (refusal !== null) throw new Error(`the bench's own apply is refused: ${refusal.problem}`);

  const message = Buffer.from(text, 'utf8');
  const trusted = [parsePublicKey(line)];
  const cases = {
    'signature only (verifySignature)': () =>
      verifySignature(message, signed.signature, 'datum-desired', trusted, 'trust.desired'),
    'whole check per apply (untrustedIntent)': () => untrustedIntent(config, signed, action, new Date()),
    'whole check per signed retake (decisionAuthor)': () => decisionAuthor(config, retake, decision, null, new Date()),
  };
  const times = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
  for (const f of Object.values(cases)) for (let i = 0; i < 200; i++) f(); // warm up
  for (let i = 0; i < runs; i++)
    for (const [name, f] of Object.entries(cases)) {
      const t0 = process.hrtime.bigint();
      f();
      times[name].push(Number(process.hrtime.bigint() - t0) / 1e3);
    }
  const at = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
  console.log(`| ${runs} runs, ${text.length}-byte document, ${statement.length}-byte statement | median µs | p99 µs |`);
  console.log('|---|---|---|');
  for (const [name, xs] of Object.entries(times))
    console.log(`| ${name} | ${at(xs, 0.5).toFixed(0)} | ${at(xs, 0.99).toFixed(0)} |`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
