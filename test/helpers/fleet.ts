// A real fleet directory on disk for integration tests: desired/nodes/<node>.yaml, agents/<node>.yaml
// (each node's root under <fleet>/nodes/<node>) and artifacts/ built from examples/demo-app.
import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { auditSqliteLedgersUnder } from './ledger-audit';
import { killProcessesUnder } from './processes';

export interface DesiredOptions {
  version?: string;
  /** config D7 is { workers: 8 }; anything else is another digest. */
  workers?: number;
  maintenance?: boolean;
  policy?: Record<string, unknown>;
  /** Artifact file name under artifacts/ (default app-<version>.tgz). */
  artifact?: string;
  extra?: Record<string, unknown>;
}

export interface AgentOptions {
  mode?: 'observe' | 'enforce';
  resources?: Record<string, 'observe'>;
  overrides?: Record<string, { approved_by: string; reason: string; since: string }>;
  /** agent.yaml's trust anchors: the public key lines it accepts for desired state, and whether it requires them. */
  trust?: { desired: string[]; require: boolean };
}

export const MAINTENANCE = { approved_by: 'oncall', reason: 'disk swap CHG-1234', since: '2026-11-28T10:00:00Z' };

/** Fast test policy: short resync and node_timeout so a test sees several passes in seconds. */
export const FAST_POLICY = {
  resync_interval: '1s',
  node_timeout: '3s',
  observation_ttl: '60s',
  backoff: { initial: '1s', factor: 2, max: '4s' },
};

export class Fleet {
  private readonly built = new Map<string, string>();

  private constructor(readonly dir: string) {}

  static async create(prefix = 'datum-fleet-'): Promise<Fleet> {
    const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
    await Promise.all(
      ['desired/nodes', 'agents', 'artifacts', 'nodes'].map((d) => fs.mkdir(path.join(dir, d), { recursive: true })),
    );
    return new Fleet(dir);
  }

  root(node: string): string {
    return path.join(this.dir, 'nodes', node);
  }

  agentFile(node: string): string {
    return path.join(this.dir, 'agents', `${node}.yaml`);
  }

  desiredFile(node: string): string {
    return path.join(this.dir, 'desired', 'nodes', `${node}.yaml`);
  }

  /** Builds app-<version>.tgz (optionally one whose service reports another build) and returns its sha256. */
  async artifact(version: string, reportBuild?: string): Promise<{ name: string; sha256: string }> {
    const name = reportBuild ? `app-${version}-reports-${reportBuild}.tgz` : `app-${version}.tgz`;
    const cached = this.built.get(name);
    if (cached) return { name, sha256: cached };
    const { buildArtifact } = await import('../../scripts/build-artifact.mjs');
    const staging = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-art-'));
    const out = await buildArtifact({ version, outDir: staging, reportBuild });
    await fs.rename(out.file, path.join(this.dir, 'artifacts', name));
    await fs.rm(staging, { recursive: true, force: true });
    this.built.set(name, out.sha256);
    return { name, sha256: out.sha256 };
  }

  /** Builds app-<version>-<label>.tgz from a service of the test's own (sourceDir/server.js) and returns its sha256. */
  async artifactFrom(version: string, label: string, sourceDir: string): Promise<{ name: string; sha256: string }> {
    const name = `app-${version}-${label}.tgz`;
    const { buildArtifact } = await import('../../scripts/build-artifact.mjs');
    const staging = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-art-'));
    const out = await buildArtifact({ version, outDir: staging, sourceDir });
    await fs.rename(out.file, path.join(this.dir, 'artifacts', name));
    await fs.rm(staging, { recursive: true, force: true });
    this.built.set(name, out.sha256);
    return { name, sha256: out.sha256 };
  }

  async writeDesired(node: string, generation: number, o: DesiredOptions = {}): Promise<void> {
    const version = o.version ?? '7.4';
    const art = o.artifact
      ? { name: o.artifact, sha256: this.built.get(o.artifact) ?? 'f'.repeat(64) }
      : await this.artifact(version);
    const doc = {
      node,
      generation,
      resources: {
        build: { type: 'release', version, artifact: `artifacts/${art.name}`, sha256: art.sha256 },
        config: { type: 'file', path: 'etc/app/config.json', content: { workers: o.workers ?? 8 } },
        app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
        maintenance: { type: 'flag', value: o.maintenance ?? false },
        ...o.extra,
      },
      policy: { ...FAST_POLICY, ...o.policy },
    };
    await writeAtomic(this.desiredFile(node), stringify(doc));
  }

  async writeAgent(node: string, o: AgentOptions = {}): Promise<string> {
    const doc = {
      node,
      root: this.root(node),
      reconciliation: { mode: o.mode ?? 'enforce', resources: o.resources ?? {} },
      overrides: o.overrides ?? {},
      ...(o.trust ? { trust: o.trust } : {}),
    };
    await writeAtomic(this.agentFile(node), stringify(doc));
    return this.agentFile(node);
  }

  /** Stops what runs in it, audits every ledger written in it (test/helpers/ledger-audit.ts), and removes it. */
  async remove(): Promise<void> {
    killProcessesUnder(this.dir);
    try {
      await auditSqliteLedgersUnder(this.dir);
    } finally {
      await fs.rm(this.dir, { recursive: true, force: true });
    }
  }
}

async function writeAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, text);
  await fs.rename(tmp, file);
}

/**
 * Another writer, as a real process: keeps `file` at its own `content`, checking every 50 ms.
 * The caller kills it (SIGKILL) when the test is done.
 */
export function startConflictingWriter(file: string, content: string): ChildProcess {
  const script = `const fs=require('fs');const [f,c]=process.argv.slice(1);setInterval(()=>{let cur=null;try{cur=fs.readFileSync(f,'utf8')}catch{}if(cur!==c)fs.writeFileSync(f,c)},50);`;
  return spawn(process.execPath, ['-e', script, file, content], { stdio: 'ignore' });
}
