// Bundles the controller's workflow code ahead of time: `node scripts/bundle-workflows.mjs FILE`
// after `npm run build`. A worker started with DATUM_WORKFLOW_BUNDLE=FILE loads it instead of
// bundling at start (src/worker/bundle.ts). The Dockerfile runs this in its build stage.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node scripts/bundle-workflows.mjs FILE\n');
  process.exit(2);
}
const { writeWorkflowBundle } = require('../dist/src/worker/bundle.js');
const written = await writeWorkflowBundle(file);
process.stdout.write(`workflow bundle: ${written.file} (${written.bytes} bytes)\n`);
