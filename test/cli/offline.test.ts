import { execFile, spawnSync } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import prettier from 'prettier';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderCliDocs } from '../../src/cli/docs';
import { jsonSchemas } from '../../src/cli/schemas';
import { projectRoot } from '../../src/worker/paths';
import { INSTALL_TIMEOUT_MS, toolOrSkip } from '../helpers/tools';

/*
 * The `datum` command as a user meets it before any server is involved: help, version, usage
 * errors and their exit codes, environment binding, an unreachable server, `validate` on real
 * files, shell completion run in a real bash, what each command loads, and the generated files.
 * Every case runs the real bin/datum.js as a child process.
 */

const run = promisify(execFile);
const ROOT = projectRoot();
const DATUM = path.join(ROOT, 'bin', 'datum.js');
let tmp: string;

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

async function datum(args: string[], env: Record<string, string | undefined> = {}, nodeArgs: string[] = []): Promise<Ran> {
  const childEnv: Record<string, string | undefined> = { ...process.env, ...env };
  for (const k of ['DATUM_FLEET', 'DATUM_DATA', 'TEMPORAL_ADDRESS', 'TEMPORAL_PROFILE']) if (!(k in env)) delete childEnv[k];
  try {
    const { stdout, stderr } = await run(process.execPath, [...nodeArgs, DATUM, ...args], { env: childEnv, cwd: tmp });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-cli-offline-')));
});
afterAll(async () => {
  await fs.rm(tmp, { recursive: true, force: true });
});

describe('help, version and usage errors', () => {
  it('--version prints the package version; --help lists every command', async () => {
    const pkg = JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const version = await datum(['--version']);
    expect(version).toMatchObject({ code: 0, stdout: `datum ${pkg.version}\n` });
    const help = await datum(['--help']);
    expect(help.code).toBe(0);
    for (const c of [
      'dev',
      'worker',
      'agent',
      'rollout',
      'status',
      'nodes',
      'describe',
      'ledger',
      'resolve',
      'refresh',
      'validate',
      'diff',
      'completion',
    ])
      expect(help.stdout).toMatch(new RegExp(`^  ${c} `, 'm'));
    const rollout = await datum(['rollout', '--help']);
    expect(rollout.stdout).toMatch(/start \[options\][\s\S]*status \[options\] \[rollout\][\s\S]*list[\s\S]*cancel/);
    // The connection flags are in the help of the commands that take them (issue 12: they were not).
    const resolve = await datum(['resolve', '--help']);
    expect(resolve.stdout).toMatch(/--address <host:port>[\s\S]*-n, --namespace[\s\S]*--tls-ca-path/);
  });

  it('no command, an unknown command or option, a missing argument: exit 2, usage on stderr, a suggestion', async () => {
    const none = await datum([]);
    expect(none).toMatchObject({ code: 2, stdout: '' });
    expect(none.stderr).toMatch(/Usage: datum \[options\] \[command\]/);
    const typo = await datum(['statsu']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/^datum: unknown command "statsu" — fix: did you mean status\?/);
    const option = await datum(['nodes', '--statsu', 'BLOCKED']);
    expect(option.code).toBe(2);
    expect(option.stderr).toMatch(/datum nodes: unknown option "--statsu" — fix: did you mean --status\?/);
    expect(option.stderr).toMatch(/Usage: datum nodes \[options\]/);
    const missing = await datum(['describe']);
    expect(missing.code).toBe(2);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toMatch(/missing required argument "node" — fix:[\s\S]*Usage: datum describe \[options\] <node>/);
    const sub = await datum(['rollout', 'begin']);
    expect(sub.code).toBe(2);
    expect(sub.stderr).toMatch(/unknown command "begin"/);
  });

  it('bad values: a duration, an output format, a generation, a node, a status: exit 2 with the fix', async () => {
    const since = await datum(['ledger', 'N-1', '--since', '5x']);
    expect(since.code).toBe(2);
    expect(since.stderr).toMatch(/--since "5x" is neither a time nor a duration — fix: .*how long ago \(90m, 1h, 2d\)/);
    const timeout = await datum(['rollout', 'start', '--generation', '1', '--nodes', 'N-1', '--wait', '--timeout', 'soon']);
    expect(timeout.code).toBe(2);
    expect(timeout.stderr).toMatch(/--timeout "soon" is not a duration — fix: write a number followed by a unit/);
    const noWait = await datum(['rollout', 'start', '--generation', '1', '--nodes', 'N-1', '--timeout', '1m']);
    expect(noWait.stderr).toMatch(/--timeout limits --wait — fix: add --wait/);
    const format = await datum(['nodes', '-o', 'yaml']);
    expect(format.code).toBe(2);
    expect(format.stderr).toMatch(/argument "yaml" is invalid\. Allowed choices are text, json, jsonl/);
    const both = await datum(['validate', '--json', '-o', 'text', 'x.yaml']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--json and -o text disagree/);
    const generation = await datum(['rollout', 'start', '--generation', 'twelve', '--nodes', 'N-1']);
    expect(generation.code).toBe(2);
    expect(generation.stderr).toMatch(/--generation must be a whole number of 1 or more, got "twelve"/);
    const node = await datum(['describe', '../etc']);
    expect(node.code).toBe(2);
    expect(node.stderr).toMatch(/"\.\.\/etc" is not a node name/);
    const status = await datum(['nodes', '--status', 'CONVERGED,GREEN']);
    expect(status.code).toBe(2);
    expect(status.stderr).toMatch(
      /--status "GREEN": not known — fix: use CONVERGED, DRIFTED, RETRY, BLOCKED, CONFLICT, SUPERSEDED/,
    );
    const fleet = path.join(ROOT, 'examples', 'fleet');
    for (const [args, env] of [
      [['worker', '--fleet', fleet, '--max-cached-workflows', '0'], {}],
      [['worker', '--fleet', fleet], { DATUM_MAX_CACHED_WORKFLOWS: 'lots' }],
    ] as const) {
      const cache = await datum([...args], env);
      expect(cache.code).toBe(2);
      expect(cache.stderr).toMatch(
        /--max-cached-workflows \(or DATUM_MAX_CACHED_WORKFLOWS\) is "(0|lots)", not a whole number of 1 or more — fix: give how many loops/,
      );
    }
    // Loop shards: a count out of range, and shards to serve that the count does not have.
    for (const [args, env, said] of [
      [
        ['--loop-shards', '0'],
        {},
        /--loop-shards \(or DATUM_LOOP_SHARDS\) is "0", not a whole number from 1 to 64 — fix: give every controller/,
      ],
      [[], { DATUM_LOOP_SHARDS: '65' }, /--loop-shards \(or DATUM_LOOP_SHARDS\) is "65", not a whole number from 1 to 64/],
      [
        ['--loop-shards', '4', '--serve-shards', '1,4'],
        {},
        /--serve-shards \(or DATUM_SERVE_SHARDS\) has "4", not a shard or a range of shards from 0 to 3 — fix: list shards below --loop-shards 4/,
      ],
      [['--loop-shards', '4', '--serve-shards', '3-1'], {}, /has "3-1", not a shard or a range/],
      [
        ['--serve-shards', '2'],
        {},
        /--serve-shards \(or DATUM_SERVE_SHARDS\) is "2", but the loops run in one shard \(datum-control\) — fix: give --loop-shards/,
      ],
    ] as const) {
      const shards = await datum(['worker', '--fleet', fleet, ...args], env);
      expect(shards.code).toBe(2);
      expect(shards.stderr).toMatch(said);
    }
    const shell = await datum(['completion', 'tcsh']);
    expect(shell.code).toBe(2);
    expect(shell.stderr).toMatch(/no completion for shell "tcsh" — fix: use one of bash, zsh, fish/);
  });
});

describe('environment and connection', () => {
  it('binds DATUM_FLEET and DATUM_DATA to --fleet and --data, and says when the fleet is missing', async () => {
    const noFleet = await datum(['rollout', 'start', '--generation', '1', '--all']);
    expect(noFleet.code).toBe(2);
    expect(noFleet.stderr).toMatch(/no fleet directory — fix: pass --fleet DIR or set DATUM_FLEET/);
    const badFleet = await datum(['validate'], { DATUM_FLEET: path.join(tmp, 'nowhere') });
    expect(badFleet.code).toBe(2);
    expect(badFleet.stderr).toMatch(/nowhere has no desired\/nodes\/ — fix: point --fleet at a fleet directory/);
    const fleet = await datum(['validate'], { DATUM_FLEET: path.join(ROOT, 'examples', 'fleet') });
    expect(fleet).toMatchObject({ code: 0, stdout: '10 file(s) valid.\n' });
    const data = path.join(tmp, 'data');
    const ledger = await datum(['ledger', 'N-1'], { DATUM_DATA: data });
    expect(ledger.stdout).toContain(`No ledger entries for N-1 in ${path.join(data, 'ledger.sqlite')}`);
  });

  it('an unreachable server is named with the fix; a flag wins over the environment; a missing profile is a usage error', async () => {
    const port = await closedPort();
    const flag = await datum(['nodes', '--address', `127.0.0.1:${port}`], { TEMPORAL_ADDRESS: '127.0.0.1:1' });
    expect(flag.code).toBe(1);
    expect(flag.stderr).toMatch(
      new RegExp(`cannot reach Temporal at 127\\.0\\.0\\.1:${port} \\(namespace default\\): .* — fix: start it \\(\`npm start\``),
    );
    const env = await datum(['status', '-n', 'prod'], { TEMPORAL_ADDRESS: `127.0.0.1:${port}` });
    expect(env.stderr).toMatch(new RegExp(`cannot reach Temporal at 127\\.0\\.0\\.1:${port} \\(namespace prod\\)`));
    const config = path.join(tmp, 'temporal.toml');
    await fs.writeFile(config, `[profile.lab]\naddress = "127.0.0.1:${port}"\nnamespace = "lab"\n`);
    const profile = await datum(['rollout', 'list', '--config-file', config, '--profile', 'lab']);
    expect(profile.stderr).toMatch(new RegExp(`cannot reach Temporal at 127\\.0\\.0\\.1:${port} \\(namespace lab\\)`));
    const missing = await datum(['nodes', '--config-file', config, '--profile', 'nope']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/Profile 'nope' not found .* — fix: check --config-file/);
  });
});

describe('datum validate', () => {
  it('names the file, line, field and fix of every problem in a malformed desired-state file, and exits 1', async () => {
    const dir = path.join(tmp, 'fleet', 'desired', 'nodes');
    await fs.mkdir(dir, { recursive: true });
    const file = path.join(dir, 'N-8.yaml');
    await fs.writeFile(
      file,
      [
        'node: N-8',
        'generation: 0',
        'resources:',
        '  build: { type: release, version: "7.3", artifact: artifacts/x.tgz }',
        '  cfg:',
        '    type: file',
        '    path: ../etc/passwd',
        '    content: { a: 1 }',
        'policy:',
        '  observation_ttl: 5x',
        '',
      ].join('\n'),
    );
    const out = await datum(['validate', file]);
    expect(out.code).toBe(1);
    const shown = path.relative(tmp, file);
    expect(out.stdout).toContain(`${shown}:2:13: generation: generation must be 1 or more — fix: start generations at 1`);
    expect(out.stdout).toContain(`${shown}:4:10: resources.build.sha256: the artifact digest is missing — fix: add sha256:`);
    expect(out.stdout).toContain(`${shown}:7:11: resources.cfg.path: "../etc/passwd" has a ".." segment`);
    expect(out.stdout).toContain(`${shown}:10:20: policy.observation_ttl: "5x" is not a duration — fix:`);
    const json = await datum(['validate', '-o', 'json', file]);
    const report = JSON.parse(json.stdout) as {
      valid: boolean;
      files: Array<{ kind: string; problems: Array<Record<string, unknown>> }>;
    };
    expect(report.valid).toBe(false);
    expect(report.files[0].kind).toBe('desired-state');
    const ttl = report.files[0].problems.find((p) => p.field === 'policy.observation_ttl');
    expect(ttl).toMatchObject({ file: shown, line: 10, column: 20, problem: '"5x" is not a duration' });
    expect(ttl?.fix).toMatch(/^write a number followed by a unit/);
  });

  it('checks agent.yaml, a YAML syntax error, a missing artifact and a wrong sha256; a file that does not exist is a usage error', async () => {
    const agents = path.join(tmp, 'fleet', 'agents');
    await fs.mkdir(agents, { recursive: true });
    await fs.writeFile(path.join(agents, 'N-3.yaml'), 'node: N-4\nroot: /var/lib/datum/N-4\nreconciliation: { mode: fix }\n');
    const agent = await datum(['validate', '-o', 'jsonl', path.join(agents, 'N-3.yaml')]);
    expect(agent.code).toBe(1);
    const lines = agent.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { field: string; line: number; fix: string });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ field: 'reconciliation.mode', line: 3 });
    expect(lines[0].fix).toMatch(/observe .* enforce/);
    const syntax = path.join(tmp, 'broken.yaml');
    await fs.writeFile(syntax, 'node: N-1\nresources: [\n');
    const broken = await datum(['validate', syntax]);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(/broken\.yaml:3:1: \(line 3, column 1\): is not valid YAML/);
    const example = await fs.readFile(path.join(ROOT, 'examples/fleet/desired/nodes/N-24.yaml'), 'utf8');
    const nodes = path.join(tmp, 'fleet', 'desired', 'nodes');
    await fs.writeFile(path.join(nodes, 'N-24.yaml'), example);
    const artifact = await datum(['validate', path.join(nodes, 'N-24.yaml')]);
    expect(artifact.stdout).toMatch(/N-24\.yaml:\d+:\d+: resources\.build\.artifact: artifacts\/app-7\.3\.tgz does not exist/);
    await fs.mkdir(path.join(tmp, 'fleet', 'artifacts'), { recursive: true });
    await fs.copyFile(
      path.join(ROOT, 'examples/fleet/artifacts/app-7.4.tgz'),
      path.join(tmp, 'fleet', 'artifacts', 'app-7.3.tgz'),
    );
    const sha = await datum(['validate', path.join(nodes, 'N-24.yaml')]);
    expect(sha.stdout).toMatch(/resources\.build\.sha256: is not the sha256 of artifacts\/app-7\.3\.tgz/);
    // A package's .deb the same way, with the fix for a .deb.
    const withPackage = await fs.readFile(path.join(ROOT, 'examples/fleet/optional/dpkg/desired/nodes/N-26.yaml'), 'utf8');
    await fs.writeFile(path.join(nodes, 'N-26.yaml'), withPackage);
    const deb = await datum(['validate', path.join(nodes, 'N-26.yaml')]);
    expect(deb.stdout).toMatch(
      /N-26\.yaml:\d+:\d+: resources\.motd\.artifact: artifacts\/demo-motd_1\.0-1_all\.deb does not exist .* — fix: build the package's \.deb .*build-deb\.mjs/,
    );
    await fs.writeFile(path.join(tmp, 'fleet', 'artifacts', 'demo-motd_1.0-1_all.deb'), 'not the .deb named\n');
    const debSha = await datum(['validate', path.join(nodes, 'N-26.yaml')]);
    expect(debSha.stdout).toMatch(
      /resources\.motd\.sha256: is not the sha256 of artifacts\/demo-motd_1\.0-1_all\.deb .* — fix: write the sha256 of the package's \.deb/,
    );
    const absent = await datum(['validate', path.join(tmp, 'absent.yaml')]);
    expect(absent.code).toBe(2);
    expect(absent.stderr).toMatch(/no such file: .*absent\.yaml — fix:/);
    const nothing = await datum(['validate']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(/nothing to validate — fix: name FILES, or the fleet with --fleet DIR/);
  });

  it("reads seed 001's agent.yaml (host:, reconciliation.mode) and says which spelling it read; datum agent defaults to /etc/datum/agent.yaml", async (ctx) => {
    const seed = path.join(tmp, 'seed', 'agent.yaml');
    await fs.mkdir(path.dirname(seed), { recursive: true });
    await fs.writeFile(seed, 'host: web-001\nroot: /var/lib/datum/web-001\n\nreconciliation:\n  mode: observe\n');
    const both = path.join(tmp, 'seed', 'both.yaml');
    await fs.writeFile(both, 'node: web-001\nhost: web-001\nroot: /var/lib/datum/web-001\n');
    const read = await datum(['validate', seed, both]);
    expect(read.code).toBe(0);
    expect(read.stdout).toMatch(
      /seed\/agent\.yaml: agent\.yaml of node web-001, named by host: \(seed 001's spelling of node:\)/,
    );
    expect(read.stdout).toMatch(/seed\/both\.yaml: agent\.yaml of node web-001, named by node: and host:/);
    const json = JSON.parse((await datum(['validate', '--json', seed])).stdout) as { files: Array<{ agent: unknown }> };
    expect(json.files[0].agent).toEqual({ node: 'web-001', node_field: 'host' });
    // Both spellings naming different nodes: which node would this agent serve? Refused, with the line.
    const two = path.join(tmp, 'seed', 'two.yaml');
    await fs.writeFile(two, 'node: web-001\nroot: /var/lib/datum/web-001\nhost: web-002\n');
    const refused = await datum(['validate', two]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/two\.yaml:3:7: host: names "web-002" but node: names "web-001" .* — fix: keep one of them/);

    // No --config: the agent reads /etc/datum/agent.yaml, and names it when it is not there.
    ctx.skip(existsSync('/etc/datum/agent.yaml'), 'this machine has an /etc/datum/agent.yaml: an agent would start');
    const agent = await datum(['agent', '--address', `127.0.0.1:${await closedPort()}`]);
    expect(agent.code).toBe(1);
    expect(agent.stderr).toMatch(
      /\/etc\/datum\/agent\.yaml: invalid agent config.*\n.*ENOENT.* — fix: create agent\.yaml at this path/,
    );
  });
});

describe('shell completion', () => {
  const complete = (script: string, line: string[]) =>
    spawnSync(
      'bash',
      [
        '-c',
        `${script}\nCOMP_WORDS=(${line.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${line.length - 1}; _datum; echo "\${COMPREPLY[*]}"`,
      ],
      {
        encoding: 'utf8',
        cwd: tmp,
      },
    );

  it('bash completes commands, subcommands, options and choices from the command tree', async () => {
    const { stdout: script, code } = await datum(['completion', 'bash']);
    expect(code).toBe(0);
    expect(complete(script, ['datum', 'ro']).stdout.trim()).toBe('rollout');
    expect(complete(script, ['datum', 'rollout', 'st']).stdout.trim().split(' ').sort()).toEqual(['start', 'status']);
    expect(complete(script, ['datum', 'nodes', '--st']).stdout.trim()).toBe('--status');
    expect(complete(script, ['datum', 'rollout', 'status', '-o', '']).stdout.trim()).toBe('text json jsonl');
    expect(complete(script, ['datum', 'completion', '']).stdout).toMatch(/bash zsh fish/);
    // The status of rollout is not the status command: its options are rollout status's.
    expect(complete(script, ['datum', 'rollout', 'status', '--w']).stdout.trim()).toBe('--wait');
  });

  it('fish completes from the same tree', { timeout: INSTALL_TIMEOUT_MS }, async (ctx) => {
    const fish = await toolOrSkip(ctx, 'fish');
    const { stdout: script } = await datum(['completion', 'fish']);
    const file = path.join(tmp, 'datum.fish');
    await fs.writeFile(file, script);
    const complete = (line: string) =>
      spawnSync(fish, ['-c', `source ${file}; complete -C '${line}'`], { encoding: 'utf8' })
        .stdout.split('\n')
        .map((l) => l.split('\t')[0]);
    expect(complete('datum rollout st')).toEqual(expect.arrayContaining(['start', 'status']));
    expect(complete('datum nodes --st')).toContain('--status');
    expect(complete('datum nodes -o ')).toEqual(expect.arrayContaining(['text', 'json', 'jsonl']));
  });

  it('zsh: the script parses and finds the command path', { timeout: INSTALL_TIMEOUT_MS }, async (ctx) => {
    const zsh = await toolOrSkip(ctx, 'zsh');
    const { stdout: script } = await datum(['completion', 'zsh']);
    const file = path.join(tmp, '_datum');
    await fs.writeFile(file, script);
    expect(spawnSync(zsh, ['-n', file], { encoding: 'utf8' }).status).toBe(0);
    // _describe and compadd stubbed to print what they are given: the completion system itself needs a terminal.
    const stubs =
      'compdef() { :; }; _describe() { print -l -- "${(@P)4}"; }; compadd() { shift; print -- "$@"; }; _files() { print FILES; }';
    const complete = (words: string[]) =>
      spawnSync(
        zsh,
        ['-c', `${stubs}; source ${file}; words=(${words.map((w) => `'${w}'`).join(' ')}); CURRENT=${words.length}; _datum`],
        {
          encoding: 'utf8',
        },
      ).stdout;
    expect(complete(['datum', 'rollout', 'st'])).toMatch(/^start:start \(or attach to\)/m);
    expect(complete(['datum', 'nodes', '-o', ''])).toContain('text json jsonl');
    expect(complete(['datum', 'worker', '--fleet', ''])).toContain('FILES');
  });
});

describe('fast start', () => {
  /** The modules a run loaded (require.cache at exit), through a preload that records them. */
  async function loaded(args: string[]): Promise<string[]> {
    const out = path.join(tmp, `modules-${Math.random().toString(36).slice(2)}.txt`);
    const preload = path.join(tmp, 'record-modules.cjs');
    await fs.writeFile(
      preload,
      `process.on('exit', () => require('fs').writeFileSync(process.env.DATUM_MODULES_OUT, Object.keys(require.cache).join('\\n')));\n`,
    );
    await datum(args, { DATUM_MODULES_OUT: out }, ['-r', preload]);
    return (await fs.readFile(out, 'utf8')).split('\n');
  }
  const has = (mods: string[], pkg: string) =>
    mods.some((m) => m.includes(`${path.sep}node_modules${path.sep}${pkg}${path.sep}`));

  it('--help and --version load commander alone; the client commands never load @temporalio/worker; the worker does', async () => {
    const port = await closedPort();
    for (const args of [['--help'], ['--version']]) {
      const mods = await loaded(args);
      expect(has(mods, 'commander')).toBe(true);
      for (const heavy of ['zod', path.join('@temporalio', 'client'), path.join('@temporalio', 'worker'), 'yaml'])
        expect(has(mods, heavy)).toBe(false);
    }
    const address = ['--address', `127.0.0.1:${port}`];
    for (const args of [
      ['nodes', ...address],
      ['status', ...address],
      ['describe', 'N-1', ...address],
      ['rollout', 'list', ...address],
      ['ledger', 'N-1', '--data', tmp],
      ['validate', path.join(ROOT, 'examples/fleet/agents/N-24.yaml')],
    ]) {
      const mods = await loaded(args);
      expect(has(mods, path.join('@temporalio', 'worker')), args.join(' ')).toBe(false);
    }
    // The check can fail: the controller worker does load it.
    const worker = await loaded(['worker', '--fleet', path.join(ROOT, 'examples/fleet'), '--data', tmp, ...address]);
    expect(has(worker, path.join('@temporalio', 'worker'))).toBe(true);
  });
});

describe('generated from the tree and the schemas', () => {
  it('docs/cli.md is what the command tree generates (npm run docs:cli)', async () => {
    expect(await fs.readFile(path.join(ROOT, 'docs/cli.md'), 'utf8')).toBe(renderCliDocs());
  });

  it('schemas/ are what the zod schemas generate (npm run schemas), and the example files point at them', async () => {
    for (const [file, text] of Object.entries(jsonSchemas())) {
      const target = path.join(ROOT, 'schemas', file);
      const formatted = await prettier.format(text, { ...((await prettier.resolveConfig(target)) ?? {}), filepath: target });
      expect(await fs.readFile(target, 'utf8'), file).toBe(formatted);
    }
    const examples = [
      ...(await fs.readdir(path.join(ROOT, 'examples/fleet/desired/nodes'))).map((f) => [
        `examples/fleet/desired/nodes/${f}`,
        'desired-state',
      ]),
      ...(await fs.readdir(path.join(ROOT, 'examples/fleet/agents'))).map((f) => [`examples/fleet/agents/${f}`, 'agent']),
      ['examples/fleet/next/N-24.yaml', 'desired-state'],
    ];
    for (const [file, kind] of examples) {
      const first = (await fs.readFile(path.join(ROOT, file), 'utf8')).split('\n')[0];
      const m = /^# yaml-language-server: \$schema=(.+)$/.exec(first);
      expect(m, file).not.toBeNull();
      expect(path.basename(m![1])).toBe(`${kind}.schema.json`);
      expect(existsSync(path.resolve(ROOT, path.dirname(file), m![1])), file).toBe(true);
    }
  });
});
