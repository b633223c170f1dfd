#!/usr/bin/env node
// Compiles src/ to dist/ for the `datum` command and the processes tests spawn. Incremental:
// a tree hash of src/ (paths, sizes, mtimes) is stamped into dist/, and an unchanged tree
// compiles nothing. Used by `npm run setup` and by the test suite's global set-up.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const stampFile = join(root, 'dist', '.datum-build-stamp');

function treeKey() {
  const hash = createHash('sha256');
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else {
        const st = statSync(full);
        hash.update(`${relative(root, full)}:${st.size}:${st.mtimeMs}\n`);
      }
    }
  };
  walk(join(root, 'src'));
  for (const f of ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json']) hash.update(readFileSync(join(root, f)));
  return hash.digest('hex');
}

/** Builds dist/ when src/ changed; returns a one-line report. Throws with tsc's output on failure. */
export function build({ force = false } = {}) {
  const key = treeKey();
  if (!force && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === key) return 'dist up to date';
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { cwd: root, encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(`compiling src/ failed (tsc -p tsconfig.build.json):\n${result.stdout}${result.stderr}`);
  }
  removeOrphans(join(root, 'dist', 'src'));
  writeFileSync(stampFile, key);
  return 'dist built';
}

/**
 * tsc's incremental build never deletes what it emitted for a source that is gone: a module split
 * into a directory would leave its old .js beside it, and Node would load the stale file first.
 */
function removeOrphans(dir) {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) {
      removeOrphans(full);
      if (readdirSync(full).length === 0) rmSync(full, { recursive: true });
      continue;
    }
    const stem = relative(join(root, 'dist'), full).replace(/(\.d)?\.(js|ts|js\.map)$/, '');
    if (stem !== relative(join(root, 'dist'), full) && !existsSync(join(root, `${stem}.ts`))) rmSync(full);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    console.log(`build: ${build({ force: process.argv.includes('--force') })}`);
  } catch (error) {
    console.error(`build failed: ${error.message}`);
    process.exit(1);
  }
}
