import { describe, expect, it } from 'vitest';
import { fileBytes, ledgerView, redactAction, sha256Hex } from '../../src/domain';
import { D6, n24, n24After, pass, snapshot } from './fixtures';

/*
 * Issue 10, hole 9: a file's content was copied into every ledger entry (and from there into the
 * store and the CLI). The ledger keeps its digest and size; a sensitive file says so.
 */

const SECRET = { password: 'hunter2-do-not-print', workers: 8 };

describe('file contents stay out of the ledger', () => {
  it('a repair of a file records its digest and size in the ledger, never its content', async () => {
    const intent = n24(12, {
      extra: { secret: { type: 'file', path: 'etc/app/secret.json', content: SECRET, sensitive: true } },
    });
    const pre = snapshot({ ...n24After(), config: D6(), app: { build: '7.4', config_sha256: D6() } });
    const { first } = await pass(
      {
        ...pre,
        resources: { ...pre.resources, secret: { type: 'file', value: null, marker: 'absent', obstruction: null, detail: {} } },
      },
      null,
      { intent },
    );
    const writes = first.decision.authorized_actions.filter((a) => a.action === 'file.write').map((a) => a.resource_key);
    expect(writes.sort()).toEqual(['config', 'secret']);
    // The agent still gets the content it must write …
    expect(JSON.stringify(first.decision.authorized_actions)).toContain('hunter2-do-not-print');
    // … the ledger does not.
    const entry = ledgerView(first.decision, intent);
    const text = JSON.stringify(entry);
    expect(text).not.toContain('hunter2-do-not-print');
    expect(text).not.toContain('"workers"');
    const secret = entry.authorized_actions.find((a) => a.resource_key === 'secret')!.spec as {
      content: unknown;
      sensitive?: boolean;
    };
    const bytes = fileBytes(SECRET);
    expect(secret.content).toEqual({ sha256: sha256Hex(bytes), bytes: Buffer.byteLength(bytes) });
    expect(secret.sensitive).toBe(true);
    expect(entry.authorized_actions.find((a) => a.resource_key === 'config')!.spec).not.toHaveProperty('sensitive');
    const config = entry.planned_actions.find((p) => p.resource_key === 'config')!.spec as { content: { sha256: string } };
    expect(config.content.sha256).toMatch(/^[a-f0-9]{64}$/);
  });

  it('actions other than file writes pass unchanged', () => {
    const install = {
      resource_key: 'build',
      action: 'release.install',
      spec: { version: '7.4', artifact: 'artifacts/app-7.4.tgz', sha256: 'a'.repeat(64) },
    };
    expect(redactAction(install, new Set(['build']))).toEqual(install);
  });
});

describe('unit files stay out of the ledger', () => {
  it("a unit.apply records its unit file's digest and size, never its text", () => {
    const dropin = '[Service]\nEnvironment=TOKEN=hunter2-do-not-print\n';
    const apply = {
      resource_key: 'web',
      action: 'unit.apply',
      spec: { name: 'web.service', file: { kind: 'dropin', content: dropin, sha256: sha256Hex(dropin) }, enable: true },
    };
    const kept = redactAction(apply, new Set());
    expect(JSON.stringify(kept)).not.toContain('hunter2');
    expect(kept.spec).toEqual({
      name: 'web.service',
      file: { kind: 'dropin', content: { sha256: sha256Hex(dropin), bytes: dropin.length }, sha256: sha256Hex(dropin) },
      enable: true,
    });
    const none = { ...apply, spec: { ...apply.spec, file: null } };
    expect(redactAction(none, new Set())).toEqual(none);
  });
});
