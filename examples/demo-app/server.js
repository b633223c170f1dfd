'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- the artifact ships server.js without a package.json, so node runs it as CommonJS */
// Datum demo service: a dependency-free HTTP server that follows the managed service contract.
//
//   PORT          the port to listen on (the agent picks a free one)
//   DATUM_CONFIG  absolute path of the config file to load
//
// GET /health answers {"build": "<build baked into build.json>", "config_sha256": "<hex sha256 of
// the config bytes loaded at start>"}: what this process actually runs, which is how Datum judges
// it (a process that is alive on 7.3 is not converged to 7.4). GET / is a small page for people.

const { createHash } = require('node:crypto');
const { readFileSync } = require('node:fs');
const http = require('node:http');
const path = require('node:path');

function fail(message) {
  process.stderr.write(`demo-app: ${message}\n`);
  process.exit(1);
}

let build;
try {
  build = JSON.parse(readFileSync(path.join(__dirname, 'build.json'), 'utf8')).build;
} catch (err) {
  fail(`cannot read build.json next to server.js (${err.message}); build the artifact with scripts/build-artifact.mjs`);
}
if (typeof build !== 'string') fail('build.json has no "build" string');

const configPath = process.env.DATUM_CONFIG;
if (!configPath) fail('DATUM_CONFIG is not set; it must name the config file to load');
let configBytes;
try {
  configBytes = readFileSync(configPath);
} catch (err) {
  fail(`cannot read the config at ${configPath} (${err.message})`);
}
const configSha256 = createHash('sha256').update(configBytes).digest('hex');

const port = Number(process.env.PORT);
if (!Number.isInteger(port) || port <= 0 || port > 65535)
  fail(`PORT must be a TCP port, not ${JSON.stringify(process.env.PORT)}`);

const startedAt = new Date().toISOString();
const escape = (s) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (req.method === 'GET' && url.pathname === '/health') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ build, config_sha256: configSha256 }));
    return;
  }
  if (req.method === 'GET' && url.pathname === '/') {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(
      `<!doctype html><title>demo-app ${escape(build)}</title>` +
        `<h1>demo-app, build ${escape(build)}</h1>` +
        `<p>pid ${process.pid}, port ${port}, up since ${startedAt}</p>` +
        `<p>config ${escape(configPath)} (sha256 <code>${configSha256}</code>):</p>` +
        `<pre>${escape(configBytes.toString('utf8'))}</pre>`,
    );
    return;
  }
  res.writeHead(404, { 'content-type': 'text/plain' });
  res.end('not found\n');
});

server.listen(port, '127.0.0.1', () => {
  process.stdout.write(
    `demo-app build ${build} listening on 127.0.0.1:${port} with config ${configPath} (sha256 ${configSha256})\n`,
  );
});

function stop(signal) {
  process.stdout.write(`demo-app: ${signal}, closing\n`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
