// Bundles the controller's workflow code ahead of time: `node scripts/bundle-workflows.mjs FILE`
// after `npm run build` writes FILE, and beside it the variant with tracing (x.js, x.traced.js).
// A worker started with DATUM_WORKFLOW_BUNDLE=FILE loads the one for whether it traces instead of
// bundling at start (src/worker/bundle.ts). The Dockerfile runs this in its build stage.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node scripts/bundle-workflows.mjs FILE\n');
  process.exit(2);
}
const { writeWorkflowBundles } = require('../dist/src/worker/bundle.js');
for (const written of await writeWorkflowBundles(file))
  process.stdout.write(`workflow bundle${written.tracing ? ' (with tracing)' : ''}: ${written.file} (${written.bytes} bytes)\n`);
