import { describe, expect, it } from 'vitest';
import { InvalidDesiredState, desiredValue, sameMarker, sha256Hex, targetNameProblem, type ResourceSpec } from '../../src/domain';
import { validateDesiredState } from '../../src/schemas/documents';
import { parseAgentConfigText } from '../../src/schemas/documents';
import { D6, D7, MAINTENANCE_OVERRIDE, actionsOf, later, n24, n24After, pass, snapshot } from './fixtures';

/*
 * A `unit` resource as desired state may declare it (src/schemas/resources/unit.ts), what a
 * correct node shows for it (src/domain/resources/unit.ts), and the watch's marker against
 * observe's. The name rules are systemd's unit_name_is_valid() without what reads as an option,
 * a glob, a template or Datum's own units: systemctl would otherwise act on another unit.
 */

const problems = (resources: Record<string, unknown>): string => {
  try {
    validateDesiredState({ node: 'N-24', generation: 1, resources }, 'desired/nodes/N-24.yaml');
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidDesiredState);
    return (err as Error).message;
  }
  return '';
};
const unit = (over: Record<string, unknown>) => ({ web: { type: 'unit', name: 'nginx.service', ...over } });

describe('unit names in desired state', () => {
  it.each([
    ['../x.service', 'starts with ".", which would read as an option or a hidden file'],
    ['a/../x.service', 'holds "/"'],
    ['x/y.service', 'holds "/"'],
    ['-x.service', 'starts with "-", which would read as an option'],
    ['--root=/tmp x.service', 'starts with "-"'],
    ['.hidden.service', 'starts with "."'],
    ['demo-*.service', 'holds "*"'],
    ['a b.service', 'holds " "'],
    ['ünï.service', 'holds "ü"'],
    ['x\\y.service', 'holds "\\\\"'],
    ['nginx', 'does not end in a unit type'],
    ['/tmp/foo', 'does not end in a unit type'],
    ['dev-vda.device', 'does not end in a unit type Datum manages'],
    ['tmpl@.service', 'is a template, which runs nothing itself; name an instance such as tmpl@instance.service'],
    ['@x.service', 'has no name before its type or its @'],
    ['datum-agent@N-24.service', 'starts with "datum-"'],
    [`${'a'.repeat(250)}.service`, 'is 258 characters long; systemd allows at most 255'],
  ])('refuses %j: %s', (name, words) => {
    const message = problems(unit({ name }));
    expect(message).toContain('resources.web.name: unit name');
    expect(message).toContain(words);
    expect(message).toContain(' — fix: write the unit name systemd knows');
  });

  it.each(['nginx.service', 'getty@tty1.service', 'foo\\x2dbar.socket', 'a:b_c.timer', 'backup.path', 'multi-user.target'])(
    'takes %j',
    (name) => {
      expect(problems(unit({ name }))).toBe('');
    },
  );

  it('names its target unit:<name>, and an agent.yaml entry for it is checked by the same rules', () => {
    expect(targetNameProblem('unit:nginx.service')).toBeNull();
    expect(targetNameProblem('unit:a/../x.service')).toBe(
      '"unit:a/../x.service" names no unit: the name holds "/", which systemd would escape or mangle into another unit\'s name',
    );
  });
});

describe('what a unit may declare', () => {
  it.each([
    [{ content: 'a', dropin: 'b' }, 'resources.web.dropin: content and dropin are both given'],
    [
      { enabled: false },
      'resources.web.enabled: enabled is only ever true — fix: leave enabled out; disabling a unit is never a repair',
    ],
    [{ active: false }, 'active is only ever true'],
    [{ dropin: 'x', restart_on: ['config'] }, 'resources.web.restart_on: restart_on is for a unit that runs'],
    [{ properties: { ActiveState: 'active' } }, '"ActiveState" is state the unit has while it runs'],
    [{ properties: { MemoryCurrent: '1' } }, '"MemoryCurrent" is state the unit has while it runs'],
    [{ properties: { ExecMainStartTimestamp: 'x' } }, 'is state the unit has while it runs'],
    [{ properties: { restart: 'always' } }, '"restart" is not a unit property name'],
    [{ properties: { Restart: true } }, 'a property value is text or a whole number'],
    [{ properties: { Environment: 'A=1\nExecStart=/bin/sh' } }, 'a property value is one line'],
    [
      { active: true, probe: { http: { url: 'http://127.0.0.1:8080/health' } } },
      'a probe only shows that the unit answers, and there is no content whose take-up could make it converged',
    ],
    [{ dropin: 'x', probe: { http: { url: 'http://127.0.0.1:8080/health' } } }, 'a probe asks a unit that runs'],
    [
      { dropin: 'x', active: true, probe: { http: { url: 'http://169.254.169.254/latest/meta-data' } } },
      'a probe asks only this host over plain http, by loopback address',
    ],
    [{ dropin: 'x', active: true, probe: { http: { url: 'http://localhost:80/' } } }, 'by loopback address'],
    [{ dropin: 'x', active: true, probe: { http: { url: 'https://127.0.0.1/' } } }, 'by loopback address'],
    [
      { dropin: 'x', active: true, probe: { command: ['redis-cli', 'ping'] } },
      'a probe command names its program by absolute path',
    ],
    [
      { dropin: 'x', active: true, probe: { command: ['/usr/bin/redis-cli', 'ping'], timeout: '1m' } },
      'a probe timeout is a duration above 0 and at most 10s',
    ],
  ])('refuses %j', (over, words) => {
    expect(problems(unit(over))).toContain(words);
  });

  it('refuses a restart_on that names no file resource of the node', () => {
    const message = problems({
      flag: { type: 'flag', value: 1 },
      ...unit({ dropin: 'x', active: true, restart_on: ['flag', 'missing'] }),
    });
    expect(message).toContain('resources.web.restart_on.0: "flag" is not a file resource of this node');
    expect(message).toContain('resources.web.restart_on.1: "missing" is not a file resource of this node');
  });

  it('refuses two units of one name: one target, one owner', () => {
    const message = problems({
      a: { type: 'unit', name: 'x.service', active: true },
      b: { type: 'unit', name: 'x.service', dropin: 'y' },
    });
    expect(message).toContain('resources.a and resources.b claim the same target unit:x.service');
  });
});

describe('what a correct node shows for a unit', () => {
  const resources: Record<string, ResourceSpec> = {
    config: { type: 'file', path: 'etc/app.conf', content: 'v2\n' },
    web: {
      type: 'unit',
      name: 'web.service',
      dropin: '[Service]\nRestart=always\n',
      enabled: true,
      active: true,
      properties: { Restart: 'always', LimitNOFILE: 65536 },
      restart_on: ['config'],
      probe: { http: { url: 'http://127.0.0.1:8080/health' } },
    },
  };

  it('declares only what the spec declares, with the evidence it must show: the process started after each piece of content', () => {
    expect(desiredValue('web', resources)).toEqual({
      dropin_sha256: sha256Hex('[Service]\nRestart=always\n'),
      enabled: true,
      active: true,
      properties: { Restart: 'always', LimitNOFILE: '65536' },
      started_after: { 'web.service.d/50-datum.conf': sha256Hex('[Service]\nRestart=always\n'), config: sha256Hex('v2\n') },
      answers: true,
    });
    expect(desiredValue('u', { u: { type: 'unit', name: 'nginx.service', active: true } })).toEqual({ active: true });
    expect(desiredValue('u', { u: { type: 'unit', name: 'x.service', content: 'c' } })).toEqual({
      content_sha256: sha256Hex('c'),
    });
  });
});

describe("a unit's marker", () => {
  const observe = 'unit:0123456789abcdef|file:1:2:3:4:aaaaaaaaaaaaaaaa';
  it("the watch's reading adds the running state, which only two watch readings compare", () => {
    expect(sameMarker(observe, 'unit:0123456789abcdef|file:1:2:3:4|active:42:inv1')).toBe(true);
    expect(
      sameMarker('unit:0123456789abcdef|file:1:2:3:4|active:42:inv1', 'unit:0123456789abcdef|file:1:2:3:4|failed:0:inv1'),
    ).toBe(false);
    expect(sameMarker(observe, 'unit:fedcba9876543210|file:1:2:3:4:aaaaaaaaaaaaaaaa')).toBe(false);
    expect(sameMarker(observe, 'unit:0123456789abcdef|file:1:2:3:5:aaaaaaaaaaaaaaaa')).toBe(false);
    expect(sameMarker(observe, 'unit:0123456789abcdef|absent')).toBe(false);
    expect(sameMarker(observe, 'file:1:2:3:4:aaaaaaaaaaaaaaaa')).toBe(false);
  });
});

describe('agent.yaml allow.probes', () => {
  const parse = (allow: string) => parseAgentConfigText(`node: N-24\nroot: /var/lib/datum/N-24\nallow:\n${allow}`, 'agent.yaml');
  it('takes URLs and argv lists, and refuses a command by bare name', () => {
    expect(parse('  probes: ["http://127.0.0.1:*/health", ["/usr/bin/redis-cli", "ping"]]\n').allow.probes).toEqual([
      'http://127.0.0.1:*/health',
      ['/usr/bin/redis-cli', 'ping'],
    ]);
    expect(parse('  units: []\n').allow.probes).toEqual([]);
    expect(() => parse('  probes: [["redis-cli", "ping"]]\n')).toThrow(
      /an allowed command probe names its program by absolute path/,
    );
  });
});

describe('a unit in a pass of the loop', () => {
  const DROP = '[Service]\nEnvironment=A=1\n';
  const intent = n24(12, {
    extra: { web: { type: 'unit', name: 'web.service', dropin: DROP, active: true, restart_on: ['config'] } },
  });
  const webValue = (config: string) => ({
    dropin_sha256: sha256Hex(DROP),
    active: true,
    started_after: { 'web.service.d/50-datum.conf': sha256Hex(DROP), config },
  });
  const withWeb = (o: ReturnType<typeof snapshot>, config: string, marker = 'unit:aaaaaaaaaaaaaaaa|file:1:2:3:4:5') => ({
    ...o,
    resources: { ...o.resources, web: { type: 'unit' as const, value: webValue(config), marker, obstruction: null, detail: {} } },
  });

  it('restarts a unit in the same pass as the restart_on file it depends on is written, after it', async () => {
    // The unit runs on the old config (D6) it started after; desired state wants D7.
    const pre = withWeb(snapshot({ ...n24After(), config: D6(), app: { build: '7.4', config_sha256: D6() } }), D6());
    const post = withWeb(snapshot(n24After(), { at: later(5000) }), D7(), 'unit:aaaaaaaaaaaaaaaa|file:1:2:3:4:5');
    const { first } = await pass(pre, () => post, { intent });
    expect(actionsOf(first)).toEqual(['config:file.write', 'app:service.restart', 'web:unit.apply']);
    const web = first.decision.resources.find((r) => r.resource_key === 'web')!;
    expect(web.desired).toEqual(webValue(D7()));
    expect(web.drift).toBe(true);
  });

  it('does not restart it while the file is operator-owned and the process already started after what is on disk', async () => {
    const pre = withWeb(
      snapshot(
        { ...n24After(), config: D6(), app: { build: '7.4', config_sha256: D6() } },
        { overrides: { config: MAINTENANCE_OVERRIDE } },
      ),
      D6(),
    );
    const { first } = await pass(pre, () => pre, { intent });
    expect(actionsOf(first)).not.toContain('web:unit.apply');
    expect(first.decision.resources.find((r) => r.resource_key === 'web')!.drift).toBe(false);
  });
});
