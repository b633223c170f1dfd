// The agent without the CLI around it, for bench/agent-rss.mjs: runAgents from
// dist/src/agent/worker.js for one agent.yaml, which is what `datum agent` would load if the CLI
// imported each command only when it runs.   node bench/agent-only.js ADDRESS AGENT_YAML
'use strict';
const path = require('node:path');
const { runAgents } = require(path.join(__dirname, '..', 'dist', 'src', 'agent', 'worker.js'));

const [address, config] = process.argv.slice(2);
runAgents({ configPaths: [config], address }).then((agents) => {
  process.stdout.write(`agent-only: serving ${agents.nodes.join(', ')}\n`);
  process.on('SIGTERM', () => void agents.shutdown());
  return agents.done;
});
