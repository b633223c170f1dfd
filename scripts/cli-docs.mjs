// Writes docs/cli.md and schemas/*.json from the command tree and the zod schemas (run by
// `npm run docs:cli` and `npm run schemas`, after the build). test/cli/generated.test.ts checks them.
import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import prettier from 'prettier';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const what = process.argv[2] ?? 'all';

if (what === 'all' || what === 'docs') {
  const { renderCliDocs } = require(path.join(root, 'dist/src/cli/docs.js'));
  await writeFile(path.join(root, 'docs/cli.md'), renderCliDocs());
  console.log('wrote docs/cli.md');
}
if (what === 'all' || what === 'schemas') {
  const { jsonSchemas } = require(path.join(root, 'dist/src/cli/schemas.js'));
  await mkdir(path.join(root, 'schemas'), { recursive: true });
  for (const [file, text] of Object.entries(jsonSchemas())) {
    const target = path.join(root, 'schemas', file);
    const options = (await prettier.resolveConfig(target)) ?? {};
    await writeFile(target, await prettier.format(text, { ...options, filepath: target }));
    console.log(`wrote schemas/${file}`);
  }
}
