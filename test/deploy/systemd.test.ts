// deploy/systemd: the units checked by systemd itself (systemd-analyze, installed when missing; verify:
// every directive known in its section, the executable there; security --offline: the hardening
// score), and always by what an operator relies on: a restart policy, a dedicated user, the
// write access limited to the node root, the Temporal connection from an EnvironmentFile, and a
// stop timeout that fits the worker's shutdown (src/worker/shutdown.ts).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAgentConfigText } from '../../src/schemas/documents';
import { projectRoot } from '../../src/worker/paths';
import { SHUTDOWN_BUDGET_S } from '../../src/worker/shutdown';
import { LOOP_HEAP_MIB, cacheSizeForHeap } from '../../src/worker/loop-cache';
import { INSTALL_TIMEOUT_MS, toolOrSkip } from '../helpers/tools';

const DIR = path.join(projectRoot(), 'deploy', 'systemd');
const AGENT_UNIT = path.join(DIR, 'datum-agent@.service');
const WORKER_UNIT = path.join(DIR, 'datum-worker.service');
const scratch = mkdtempSync(path.join(os.tmpdir(), 'datum-systemd-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

type Unit = Map<string, Map<string, string[]>>;

/** systemd's unit-file syntax: [Section] headers, Key=Value lines (repeatable), # and ; comments, \ continuations. */
function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Map<string, string[]> | undefined;
  for (const raw of text.replace(/\\\n/g, ' ').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) {
      section = new Map();
      unit.set(header[1], section);
      continue;
    }
    const eq = line.indexOf('=');
    if (!section || eq <= 0) throw new Error(`not a Key=Value line inside a section: ${raw}`);
    const key = line.slice(0, eq).trim();
    section.set(key, [...(section.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return unit;
}

const one = (unit: Unit, section: string, key: string) => unit.get(section)?.get(key)?.at(-1);

/**
 * A copy systemd-analyze can load: a template instantiated, ExecStart's node (the package's for the
 * agent, /usr/bin/node for the worker) the one running this test where that one is not installed.
 */
function loadable(file: string, instance?: string): string {
  const name = instance ? path.basename(file).replace('@.service', `@${instance}.service`) : path.basename(file);
  const copy = path.join(scratch, name);
  copyFileSync(file, copy);
  const node = /^ExecStart=(\S+) /m.exec(readFileSync(copy, 'utf8'))![1];
  if (!existsSync(node))
    writeFileSync(copy, readFileSync(copy, 'utf8').replace(`ExecStart=${node} `, `ExecStart=${process.execPath} `));
  return copy;
}

describe.each([
  ['datum-agent@.service', AGENT_UNIT, 'N-24'],
  ['datum-worker.service', WORKER_UNIT, undefined],
])('%s', (name, file, instance) => {
  const unit = parseUnit(readFileSync(file, 'utf8'));
  const service = unit.get('Service')!;
  // What %i expands to for the instance systemd-analyze loads.
  const expand = (v: string) => (instance ? v.replaceAll('%i', instance) : v);

  it('passes systemd-analyze verify with no warning', { timeout: INSTALL_TIMEOUT_MS }, async (ctx) => {
    const analyze = await toolOrSkip(ctx, 'systemd-analyze');
    const result = spawnSync(analyze, ['verify', loadable(file, instance)], { encoding: 'utf8' });
    // verify exits 0 on an unknown directive, only warning about it: the warnings count.
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr.trim(), 'systemd-analyze verify says nothing').toBe('');
  });

  it(
    'is hardened: systemd-analyze security rates its exposure OK (2.0 or lower)',
    { timeout: INSTALL_TIMEOUT_MS },
    async (ctx) => {
      const analyze = await toolOrSkip(ctx, 'systemd-analyze');
      const result = spawnSync(analyze, ['security', '--offline=yes', loadable(file, instance)], { encoding: 'utf8' });
      const score = /Overall exposure level for \S+: (\d+\.\d+)/.exec(result.stdout);
      expect(score, `${result.stdout}${result.stderr}`).not.toBeNull();
      expect(Number(score![1])).toBeLessThanOrEqual(2.0);
    },
  );

  it('restarts, runs as the dedicated datum user, and takes the Temporal connection from an EnvironmentFile', () => {
    expect(one(unit, 'Service', 'Restart')).toMatch(/^(always|on-failure)$/);
    expect(one(unit, 'Service', 'RestartSec')).toBeTruthy();
    expect(one(unit, 'Unit', 'StartLimitBurst'), 'a crash loop ends').toBeTruthy();
    expect(one(unit, 'Service', 'User')).toBe('datum');
    expect(one(unit, 'Service', 'Group')).toBe('datum');
    expect(service.get('EnvironmentFile')).toContain('/etc/datum/temporal.env');
    const sysusers = readFileSync(path.join(DIR, 'datum.sysusers'), 'utf8');
    expect(sysusers, 'the user is declared for systemd-sysusers').toMatch(/^u datum /m);
    const example = readFileSync(path.join(DIR, 'temporal.env.example'), 'utf8');
    for (const key of ['TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE']) expect(example).toMatch(new RegExp(`^${key}=`, 'm'));
  });

  it('may write only its own state directory: ProtectSystem=strict, ReadWritePaths the StateDirectory', () => {
    expect(one(unit, 'Service', 'ProtectSystem')).toBe('strict');
    for (const key of ['NoNewPrivileges', 'PrivateTmp', 'ProtectHome', 'PrivateDevices', 'ProtectKernelTunables'])
      expect(one(unit, 'Service', key), key).toBe('yes');
    expect(one(unit, 'Service', 'CapabilityBoundingSet'), 'no capabilities').toBe('');
    const state = `/var/lib/${one(unit, 'Service', 'StateDirectory')!}`;
    expect(service.get('ReadWritePaths')).toEqual([state]);
    expect(one(unit, 'Service', 'MemoryDenyWriteExecute'), "V8's JIT needs W+X memory").toBeUndefined();
    if (instance) expect(expand(state)).toBe(`/var/lib/datum/${instance}`);
  });

  it(`gives the process ${SHUTDOWN_BUDGET_S} s between SIGTERM and SIGKILL, as compose does`, () => {
    expect(one(unit, 'Service', 'TimeoutStopSec')).toBe(`${SHUTDOWN_BUDGET_S}s`);
  });
});

describe('datum-worker.service memory (issue 33)', () => {
  const unit = parseUnit(readFileSync(WORKER_UNIT, 'utf8'));
  const mib = (v: string) => Number(/^(\d+)([MG])$/.exec(v)![1]) * (v.endsWith('G') ? 1024 : 1);
  const env = new Map((unit.get('Service')!.get('Environment') ?? []).map((e) => e.split('=', 2) as [string, string]));

  it('caps the heap, sets the loop cache that fits it, and keeps the heap under MemoryHigh under MemoryMax', () => {
    const heap = Number(/--max-old-space-size=(\d+)/.exec(one(unit, 'Service', 'ExecStart')!)?.[1]);
    expect(heap, 'the heap is capped').toBeGreaterThan(0);
    const cache = Number(env.get('DATUM_MAX_CACHED_WORKFLOWS'));
    expect(cache, 'the cache is set, not the SDK’s').toBeGreaterThan(0);
    expect(cache).toBeLessThanOrEqual(cacheSizeForHeap(heap));
    expect(cache * LOOP_HEAP_MIB, 'a thousand loops fit').toBeGreaterThanOrEqual(1000 * LOOP_HEAP_MIB);
    const high = mib(one(unit, 'Service', 'MemoryHigh')!);
    expect(high).toBeGreaterThan(heap);
    expect(mib(one(unit, 'Service', 'MemoryMax')!)).toBeGreaterThan(high);
    expect(env.get('MALLOC_ARENA_MAX'), 'as the agent: two malloc arenas').toBe('2');
  });
});

describe('datum.sysusers', () => {
  it('declares the datum user in a form systemd-sysusers accepts', { timeout: INSTALL_TIMEOUT_MS }, async (ctx) => {
    const sysusers = await toolOrSkip(ctx, 'systemd-sysusers');
    const root = path.join(scratch, 'sysroot');
    spawnSync('mkdir', ['-p', path.join(root, 'etc')]);
    const result = spawnSync(sysusers, [`--root=${root}`, '--dry-run', path.join(DIR, 'datum.sysusers')], {
      encoding: 'utf8',
    });
    expect(result.status, result.stderr).toBe(0);
    expect(`${result.stdout}${result.stderr}`).toMatch(/Would write \/etc\/passwd/);
  });
});

describe('datum-agent@.service', () => {
  const unit = parseUnit(readFileSync(AGENT_UNIT, 'utf8'));
  it("runs the packaged agent (datum-agent) on the instance's agent.yaml, whose root must be the unit's writable directory", () => {
    const exec = one(unit, 'Service', 'ExecStart')!.split(/\s+/);
    expect(exec.slice(-3)).toEqual(['/usr/lib/datum-agent/datum-agent.js', '--config', '/etc/datum/agents/%i.yaml']);
    // The agent.yaml docs/production.md tells an operator to write, through the real parser.
    const config = parseAgentConfigText('node: N-24\nroot: /var/lib/datum/N-24\n', '/etc/datum/agents/N-24.yaml');
    expect(one(unit, 'Service', 'ReadWritePaths')!.replaceAll('%i', config.node)).toBe(config.root);
  });

  it('leaves the services it manages running when only the agent stops or restarts', () => {
    expect(one(unit, 'Service', 'KillMode')).toBe('process');
  });
});
