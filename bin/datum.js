#!/usr/bin/env node
// The `datum` command. Runs the compiled CLI from dist/, which `npm run setup` builds.
'use strict';
const path = require('node:path');
const fs = require('node:fs');

const entry = path.join(__dirname, '..', 'dist', 'src', 'cli', 'main.js');
if (!fs.existsSync(entry)) {
  process.stderr.write('datum: the CLI is not built yet — fix: run `npm run setup` in ' + path.dirname(__dirname) + '\n');
  process.exit(2);
}
require(entry)
  .main(process.argv.slice(2))
  .then((code) => {
    process.exitCode = code;
    if (code !== 0) exitSoon(code);
  })
  .catch((error) => {
    process.stderr.write(`datum: ${error && error.stack ? error.stack : String(error)}\n`);
    process.exitCode = 1;
    exitSoon(1);
  });

// A command that failed must end the process even when a connection or worker it opened is
// still holding the event loop: a unit or a container restarts it instead of watching it hang.
// Unreferenced, so a process that ends by itself is not held back.
function exitSoon(code) {
  setTimeout(() => process.exit(code), 1000).unref();
}
