'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- packed alone into a release artifact, so node runs it as CommonJS */
// The fault harness's managed service: the demo service's contract (PORT, DATUM_CONFIG, GET /health
// answering {build, config_sha256}), plus one line appended per start to START_LOG, a file outside
// every node root that Datum neither reads nor writes. faults/run.mjs bakes START_LOG's absolute
// path in when it packs the artifact, so the count of starts is the app's own, not Datum's.

const { appendFileSync, readFileSync } = require('node:fs');
const { createHash } = require('node:crypto');
const http = require('node:http');
const path = require('node:path');

const START_LOG = '__START_LOG__';

const build = JSON.parse(readFileSync(path.join(__dirname, 'build.json'), 'utf8')).build;
const configPath = process.env.DATUM_CONFIG;
const configSha256 = createHash('sha256').update(readFileSync(configPath)).digest('hex');
const port = Number(process.env.PORT);

// Appended before listening: a start that never becomes healthy still counts as a start.
appendFileSync(START_LOG, `${JSON.stringify({ at: new Date().toISOString(), pid: process.pid, build, port })}\n`);

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/health') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ build, config_sha256: configSha256 }));
    return;
  }
  res.writeHead(404, { 'content-type': 'text/plain' });
  res.end('not found\n');
});
server.listen(port, '127.0.0.1');

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
