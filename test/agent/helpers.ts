// Helpers for the node agent's tests: a node on a real temp directory with its agent.yaml, a
// sibling directory outside the root to prove nothing leaks, actions as a workflow would send
// them, and a raw tar writer for archives no well-behaved tool would produce.

import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { expect } from 'vitest';
import { fileBytes, idempotencyKey, type AuthorizedAction, type Json } from '../../src/domain';
import { createAgentActivities, targetMarker } from '../../src/agent/activities';
import { stopServices } from '../../src/agent/services';
import { loadAgentConfig } from '../../src/agent/config';
import type { AgentConfig } from '../../src/schemas';
import type { AgentActivities, ApplyRequest, ObserveRequest } from '../../src/contract';
import type { BuildArtifactOptions } from '../../scripts/build-artifact.mjs' with { 'resolution-mode': 'import' };

export interface TestNode {
  node: string;
  base: string;
  root: string;
  /** A directory next to the root: nothing the agent does may change it. */
  outside: string;
  configPath: string;
  acts: AgentActivities;
  writeConfig(
    extra?: Partial<{ mode: 'observe' | 'enforce'; resources: Record<string, 'observe'>; overrides: Record<string, Json> }>,
  ): Promise<void>;
  observe(resources: ObserveRequest['resources'], acts?: AgentActivities): ReturnType<AgentActivities['observe']>;
  /** `extra`: more of the request, as a loop sends it (probe_after, signed). */
  apply(action: AuthorizedAction, acts?: AgentActivities, extra?: Partial<ApplyRequest>): ReturnType<AgentActivities['apply']>;
  /** agent.yaml as the agent reads it now. */
  config(): Promise<AgentConfig>;
  cleanup(): Promise<void>;
}

const created: TestNode[] = [];

export async function makeNode(options: { node?: string; mode?: 'observe' | 'enforce' } = {}): Promise<TestNode> {
  const node = options.node ?? 'N-24';
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-agent-')));
  const root = path.join(base, 'root');
  const outside = path.join(base, 'outside');
  await fs.mkdir(root);
  await fs.mkdir(outside);
  await fs.writeFile(path.join(outside, 'precious.txt'), 'do not touch\n');
  const configPath = path.join(base, 'agent.yaml');
  const t: TestNode = {
    node,
    base,
    root,
    outside,
    configPath,
    acts: createAgentActivities(configPath),
    async writeConfig(extra = {}) {
      const doc = {
        node,
        root,
        reconciliation: { mode: extra.mode ?? options.mode ?? 'enforce', resources: extra.resources ?? {} },
        overrides: extra.overrides ?? {},
      };
      await fs.writeFile(configPath, JSON.stringify(doc, null, 2)); // JSON is YAML
    },
    observe: (resources, acts = t.acts) => runActivity((r: ObserveRequest) => acts.observe(r), { node, resources }),
    apply: async (action, acts = t.acts, extra = {}) =>
      await runActivity((r: ApplyRequest) => acts.apply(r), { ...extra, node, action: await asPlanned(t, action) }),
    config: () => loadAgentConfig(configPath),
    async cleanup() {
      await stopServices(root);
      await fs.rm(base, { recursive: true, force: true });
    },
  };
  await t.writeConfig();
  created.push(t);
  return t;
}

/** For afterEach: stop every service and remove every temp dir made by makeNode. */
export async function cleanupNodes(): Promise<void> {
  for (const t of created.splice(0)) await t.cleanup();
}

/** Runs an activity function in a mock activity Context, as a worker would. */
export async function runActivity<A, R>(fn: (arg: A) => Promise<R>, arg: A): Promise<R> {
  const env = new MockActivityEnvironment(undefined, { logger: quietLogger });
  return await env.run(fn, arg);
}

// Expected refusals would otherwise print a WARN with a stack trace each.
const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

let seq = 0;

/** Actions built without an observed_marker: t.apply reads it off the target first, as a plan would. */
const unplanned = new WeakSet<AuthorizedAction>();
const planned = new WeakMap<AuthorizedAction, AuthorizedAction>();

/**
 * The action as a workflow would send it: an action built without an observed_marker gets the
 * target's marker now, once (so applying the same action again is a replay, not a new attempt).
 */
async function asPlanned(t: TestNode, a: AuthorizedAction): Promise<AuthorizedAction> {
  if (!unplanned.has(a)) return a;
  const known = planned.get(a);
  if (known) return known;
  const marker = await targetMarker({ node: t.node, root: await fs.realpath(t.root) }, a).catch(() => null);
  const filled = { ...a, observed_marker: marker };
  planned.set(a, filled);
  return filled;
}

/** An action as the workflow sends it; idempotency_key bound to (node, key, generation, digest). */
export function action(
  node: string,
  resource_key: string,
  kind: string,
  spec: Json,
  over: Partial<AuthorizedAction> = {},
): AuthorizedAction {
  const desired_generation = over.desired_generation ?? 12;
  const desired_digest = over.desired_digest ?? `sha256:${'d7'.repeat(32)}`;
  const built: AuthorizedAction = {
    resource_key,
    action: kind,
    desired_generation,
    desired_digest,
    idempotency_key: idempotencyKey(node, resource_key, desired_generation, desired_digest),
    observed_marker: null,
    action_seq: over.action_seq ?? ++seq,
    spec,
    // A snapshot taken now, judged against a TTL no test outlives unless it means to.
    observed_at: new Date().toISOString(),
    observation_ttl: '10m',
    ...over,
  };
  if (!('observed_marker' in over)) unplanned.add(built);
  return built;
}

export const fileAction = (
  node: string,
  key: string,
  filePath: string,
  content: string | Json,
  over: Partial<AuthorizedAction> = {},
) => {
  const bytes = fileBytes(content);
  return action(node, key, 'file.write', { path: filePath, content: bytes, sha256: sha256(bytes) }, over);
};

export const sha256 = (bytes: string | Buffer) => createHash('sha256').update(bytes).digest('hex');

/** Awaits a rejection and checks it is a non-retryable ApplicationFailure of `type`; returns it. */
export async function expectRefusal(promise: Promise<unknown>, type: string): Promise<ApplicationFailure> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected a ${type} failure`).toBeInstanceOf(ApplicationFailure);
  const failure = caught as ApplicationFailure;
  expect({ type: failure.type, nonRetryable: failure.nonRetryable }, failure.message).toEqual({ type, nonRetryable: true });
  return failure;
}

/** Every entry under `dir` (recursively) with its kind and content digest or link target. */
export async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for (const name of (await fs.readdir(d)).sort()) {
      const p = path.join(d, name);
      const st = await fs.lstat(p);
      const rel = path.relative(dir, p);
      if (st.isSymbolicLink()) out[rel] = `link:${await fs.readlink(p)}`;
      else if (st.isDirectory()) {
        out[rel] = 'dir';
        await walk(p);
      } else out[rel] = `file:${sha256(await fs.readFile(p))}:${st.mtimeMs}`;
    }
  };
  await walk(dir);
  return out;
}

// ---------------------------------------------------------------------------------------------
// A minimal ustar writer, so tests can build archives with "../evil" names or outward symlinks.

export interface RawEntry {
  name: string;
  type?: 'file' | 'dir' | 'symlink' | 'hardlink' | 'fifo';
  content?: string;
  linkname?: string;
  mode?: number;
}

export function tarGz(entries: RawEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const body = Buffer.from(e.content ?? '');
    const h = Buffer.alloc(512);
    const put = (text: string, at: number, len: number) => Buffer.from(text).copy(h, at, 0, len);
    const octal = (n: number, at: number, len: number) => put(`${n.toString(8).padStart(len - 1, '0')}\0`, at, len);
    const type = e.type ?? 'file';
    put(e.name, 0, 100);
    octal(e.mode ?? (type === 'dir' ? 0o755 : 0o644), 100, 8);
    octal(0, 108, 8);
    octal(0, 116, 8);
    octal(type === 'file' ? body.length : 0, 124, 12);
    octal(946684800, 136, 12);
    put({ file: '0', hardlink: '1', symlink: '2', dir: '5', fifo: '6' }[type], 156, 1);
    if (e.linkname) put(e.linkname, 157, 100);
    put('ustar\0', 257, 6);
    put('00', 263, 2);
    h.fill(0x20, 148, 156);
    let sum = 0;
    for (const b of h) sum += b;
    put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
    blocks.push(h);
    if (type === 'file' && body.length > 0) {
      blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
    }
  }
  blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks));
}

/** Writes an archive into the test's base dir (never inside the root) and returns path + sha256. */
export async function writeArtifact(t: TestNode, name: string, bytes: Buffer): Promise<{ artifact: string; sha256: string }> {
  const dir = path.join(t.base, 'artifacts');
  await fs.mkdir(dir, { recursive: true });
  const artifact = path.join(dir, name);
  await fs.writeFile(artifact, bytes);
  return { artifact, sha256: sha256(bytes) };
}

/** scripts/build-artifact.mjs is an ES module; a CommonJS test reaches it by dynamic import. */
export async function buildArtifact(options: BuildArtifactOptions) {
  const script = await import('../../scripts/build-artifact.mjs');
  return await script.buildArtifact(options);
}

export const releaseAction = (
  t: TestNode,
  version: string,
  art: { artifact: string; sha256: string },
  over: Partial<AuthorizedAction> = {},
) => action(t.node, 'build', 'release.install', { version, artifact: art.artifact, sha256: art.sha256 }, over);
