#!/usr/bin/env node
// The `datum` command. Runs the compiled CLI from dist/, which `npm run setup` builds.
'use strict';
const path = require('node:path');
const fs = require('node:fs');

const dist = path.join(__dirname, '..', 'dist', 'src', 'cli');
if (!fs.existsSync(path.join(dist, 'main.js'))) {
  process.stderr.write('datum: the CLI is not built yet — fix: run `npm run setup` in ' + path.dirname(__dirname) + '\n');
  process.exit(2);
}
const { main } = require(path.join(dist, 'main.js'));
require(path.join(dist, 'process.js')).runAsProcess('datum', () => main(process.argv.slice(2)));
