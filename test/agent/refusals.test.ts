// The agent's own defence in depth, whatever a workflow asks: agent.yaml re-read on every call,
// observe mode, operator-owned resources, destructive and unknown actions, fencing, and the
// idempotency journal that answers a replay without acting again.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgentActivities } from '../../src/agent/activities';
import { type ResourceSpec } from '../../src/domain';
import type { ApplyRequest, ObserveRequest } from '../../src/contract';
import { action, cleanupNodes, expectRefusal, fileAction, makeNode, runActivity } from './helpers';
import { observation } from '../../src/schemas';

afterEach(cleanupNodes);

const config: ResourceSpec = { type: 'file', path: 'etc/app/config.json', content: { workers: 8 } };
const maintenance: ResourceSpec = { type: 'flag', value: false };
const provenance = { approved_by: 'oncall', reason: 'disk swap CHG-1234', since: '2026-11-28T10:00:00Z' };

describe('agent.yaml', () => {
  it('is re-read on every observation: a mode changed between two calls shows in the second', async () => {
    const t = await makeNode({ mode: 'observe' });
    const first = await t.observe({ config });
    expect(first.mode).toBe('observe');
    await t.writeConfig({ mode: 'enforce', resources: { config: 'observe' }, overrides: { maintenance: provenance } });
    const second = await t.observe({ config });
    expect(second).toMatchObject({
      mode: 'enforce',
      resource_modes: { config: 'observe' },
      overrides: { maintenance: provenance },
    });
  });

  it('when invalid, gives an observation carrying config_error instead of failing', async () => {
    const t = await makeNode();
    await fs.writeFile(t.configPath, `node: ${t.node}\nroot: relative/dir\nreconciliation: { mode: sometimes }\n`);
    const obs = await t.observe({ config });
    expect(() => observation.parse(obs)).not.toThrow();
    expect(obs).toMatchObject({ node_id: t.node, mode: 'observe', resources: {} });
    expect(obs.config_error).toContain(t.configPath);
    expect(obs.config_error).toMatch(/root: root must be an absolute path — fix:/);
    expect(obs.config_error).toMatch(/reconciliation\.mode: mode must be observe or enforce/);
  });

  it('when unreadable, gives an observation carrying config_error', async () => {
    const t = await makeNode();
    await fs.rm(t.configPath);
    const obs = await t.observe({ config });
    expect(obs.config_error).toMatch(/cannot be read \(ENOENT/);
  });

  it('when invalid, refuses every action (InvalidAgentConfig) and writes nothing', async () => {
    const t = await makeNode();
    await fs.writeFile(t.configPath, 'node: [unterminated\n');
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 })),
      'InvalidAgentConfig',
    );
    expect(failure.message).toMatch(/^file\.write of "config" on node N-24 refused: agent\.yaml is invalid/);
    // Every kind, not only file.write: a flag, a service, even one it would refuse anyway.
    for (const a of [
      action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: true }),
      action(t.node, 'app', 'service.start', {
        command: ['node', 'server.js'],
        build: '7.4',
        config_path: 'etc/app/config.json',
        config_sha256: 'x',
      }),
      action(t.node, 'config', 'file.delete', {}),
    ]) {
      expect((await expectRefusal(t.apply(a), 'InvalidAgentConfig')).message).toContain(
        `${a.action} of "${a.resource_key}" on node N-24 refused: agent.yaml is invalid`,
      );
    }
    expect(await fs.readdir(t.root)).toEqual([]);
  });
});

describe('node identity', () => {
  it('refuses to observe or apply for another node (NodeMismatch)', async () => {
    const t = await makeNode();
    const env = createAgentActivities(t.configPath);
    const obs = await expectRefusal(
      runActivity((r: ObserveRequest) => env.observe(r), { node: 'N-99', resources: {} }),
      'NodeMismatch',
    );
    expect(obs.message).toContain('this agent serves node "N-24"');
    await expectRefusal(
      runActivity((r: ApplyRequest) => env.apply(r), {
        node: 'N-99',
        action: fileAction('N-99', 'config', 'etc/app/config.json', 'x'),
      }),
      'NodeMismatch',
    );
  });
});

describe('refusals', () => {
  it('refuses any apply when the host is in observe mode (ObserveModeRefusal), and changes nothing', async () => {
    const t = await makeNode({ mode: 'observe' });
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 })),
      'ObserveModeRefusal',
    );
    expect(failure.message).toBe(
      `file.write of "config" on node N-24 refused: the host is in observe mode (reconciliation.mode: observe) in ${t.configPath} — fix: an operator on the node sets reconciliation.mode: enforce (and removes the per-resource observe) to let Datum repair it`,
    );
    expect(await fs.readdir(t.root)).toEqual([]);
  });

  it('refuses an apply to a resource set to observe on an enforcing host', async () => {
    const t = await makeNode();
    await t.writeConfig({ mode: 'enforce', resources: { config: 'observe' } });
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 })),
      'ObserveModeRefusal',
    );
    expect(failure.message).toContain('reconciliation.resources.config: observe');
    // Other resources on the same host are still enforced.
    await expect(
      t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: true })),
    ).resolves.toMatchObject({ outcome: 'applied' });
  });

  it('refuses an operator-owned resource (OperatorOwnedRefusal) and leaves its value alone', async () => {
    const t = await makeNode();
    await fs.mkdir(path.join(t.root, 'flags'));
    await fs.writeFile(path.join(t.root, 'flags/maintenance.json'), 'true\n');
    await t.writeConfig({ mode: 'enforce', overrides: { maintenance: provenance } });
    const failure = await expectRefusal(
      t.apply(action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: false })),
      'OperatorOwnedRefusal',
    );
    expect(failure.message).toContain(
      '"maintenance" is operator-owned (override approved by oncall since 2026-11-28T10:00:00Z: disk swap CHG-1234)',
    );
    expect(failure.message).toContain('fix: the operator removes overrides.maintenance');
    expect((await t.observe({ maintenance })).resources.maintenance.value).toBe(true);
  });

  it.each(['release.delete', 'file.delete', 'service.kill'])(
    'refuses the destructive action %s (DestructiveActionRefusal)',
    async (kind) => {
      const t = await makeNode();
      const failure = await expectRefusal(t.apply(action(t.node, 'config', kind, {})), 'DestructiveActionRefusal');
      expect(failure.message).toContain(`${kind} is destructive`);
    },
  );

  it('refuses an action kind it does not know (InvalidAction)', async () => {
    const t = await makeNode();
    await expectRefusal(t.apply(action(t.node, 'config', 'file.chmod', {})), 'InvalidAction');
  });

  it('refuses a malformed spec (InvalidAction)', async () => {
    const t = await makeNode();
    const failure = await expectRefusal(t.apply(action(t.node, 'config', 'file.write', { path: 'etc/x' })), 'InvalidAction');
    expect(failure.message).toMatch(/its spec is malformed \(content: /);
  });

  it('checks in order: observe mode before operator-owned before destructive', async () => {
    const t = await makeNode();
    await t.writeConfig({ mode: 'observe', overrides: { config: provenance } });
    await expectRefusal(t.apply(action(t.node, 'config', 'file.delete', {})), 'ObserveModeRefusal');
    await t.writeConfig({ mode: 'enforce', overrides: { config: provenance } });
    await expectRefusal(t.apply(action(t.node, 'config', 'file.delete', {})), 'OperatorOwnedRefusal');
  });
});

describe('fencing', () => {
  it('refuses an action of an older generation than one already accepted, naming both generations', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 9 }, { desired_generation: 13 }));
    const failure = await expectRefusal(
      t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 }, { desired_generation: 12 })),
      'StaleGenerationRefusal',
    );
    expect(failure.message).toContain(
      'it is for generation 12, but this agent already accepted generation 13 for node N-24 (first for "config")',
    );
    expect(await fs.readFile(path.join(t.root, 'etc/app/config.json'), 'utf8')).toContain('"workers": 9');
  });

  it('keeps the fence across an agent restart, per node', async () => {
    const t = await makeNode();
    await t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 9 }, { desired_generation: 13 }));
    const restarted = createAgentActivities(t.configPath);
    await expectRefusal(
      t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 }, { desired_generation: 12 }), restarted),
      'StaleGenerationRefusal',
    );
    // Same and newer generations pass; another resource of the node is fenced too (per node).
    await expect(
      t.apply(fileAction(t.node, 'config', 'etc/app/config.json', { workers: 10 }, { desired_generation: 13 }), restarted),
    ).resolves.toMatchObject({ outcome: 'applied' });
    await expectRefusal(
      t.apply(
        action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: false }, { desired_generation: 2 }),
        restarted,
      ),
      'StaleGenerationRefusal',
    );
    await expect(
      t.apply(
        action(t.node, 'maintenance', 'flag.write', { name: 'maintenance', value: false }, { desired_generation: 14 }),
        restarted,
      ),
    ).resolves.toMatchObject({ outcome: 'applied' });
  });
});

describe('idempotency journal', () => {
  it('answers a replay after an agent restart with the recorded evidence, outcome replayed, without acting', async () => {
    const t = await makeNode();
    const a = fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 }, { observed_marker: 'absent', action_seq: 1 });
    const first = await t.apply(a);
    const file = path.join(t.root, 'etc/app/config.json');
    const before = await fs.lstat(file);

    const restarted = createAgentActivities(t.configPath);
    const replay = await t.apply(a, restarted);
    expect(replay).toEqual({ ...first, outcome: 'replayed' });
    const after = await fs.lstat(file);
    expect({ ino: after.ino, mtimeMs: after.mtimeMs }).toEqual({ ino: before.ino, mtimeMs: before.mtimeMs });
    expect(await fs.readdir(path.join(t.root, '.datum/backup')).catch(() => [])).toEqual([]);
  });

  it('acts again for a new attempt (another action_seq or observed marker) of the same intent', async () => {
    const t = await makeNode();
    const a = fileAction(t.node, 'config', 'etc/app/config.json', { workers: 8 }, { observed_marker: 'absent', action_seq: 1 });
    const first = await t.apply(a);
    // Another observed marker alone (the file changed since) …
    const markerOnly = await t.apply({ ...a, observed_marker: first.marker_after });
    expect(markerOnly.outcome).toBe('applied');
    expect(markerOnly.marker_after).not.toBe(first.marker_after);
    // … another action_seq (the loop's next attempt, planned from a snapshot showing our last write) …
    const seqOnly = await t.apply({ ...a, action_seq: 2, observed_marker: markerOnly.marker_after });
    expect(seqOnly.outcome).toBe('applied');
    expect(seqOnly.marker_after).not.toBe(markerOnly.marker_after);
    // … while the very same attempt again is a replay, though its own write moved the marker since.
    expect((await t.apply({ ...a, action_seq: 2, observed_marker: markerOnly.marker_after })).outcome).toBe('replayed');
  });
});

describe('observation timing', () => {
  it('takes observed_at before reading and heartbeat_at after', async () => {
    const t = await makeNode();
    const before = Date.now();
    const obs = await t.observe({ config, maintenance });
    const after = Date.now();
    const observedAt = Date.parse(obs.observed_at);
    const heartbeatAt = Date.parse(obs.heartbeat_at!);
    expect(observedAt).toBeGreaterThanOrEqual(before);
    expect(observedAt).toBeLessThanOrEqual(heartbeatAt);
    expect(heartbeatAt).toBeLessThanOrEqual(after);
  });
});
