/*
 * The node agent as one program: `datum-agent` (src/cli/agent-main.ts) and everything it imports,
 * bundled by esbuild from the TypeScript sources into a single CommonJS file that needs nothing
 * but Node.js and the Temporal SDK's native module beside it (src/packaging/layout.ts places
 * both, the Node.js the package ships included).
 *
 * The agent never loads workflow code. Its Worker has no workflows, yet @temporalio/worker
 * requires its workflow bundler (webpack, memfs, swc) and workflow sandboxes at load time. Those
 * modules are replaced in the bundle by one that refuses to run (a misconfigured agent fails
 * loudly instead of bundling workflows), and the build fails if any of Datum's workflow code or
 * the bundler's packages reaches the output anyway.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { build, type Metafile, type Plugin } from 'esbuild';
import { projectRoot } from '../worker/paths';
import { PackagingError } from './errors';

/** Modules of @temporalio/worker that bundle or run workflow code: replaced by WORKFLOW_STUB. */
const WORKFLOW_MODULES =
  /[\\/]@temporalio[\\/]worker[\\/]lib[\\/](workflow[\\/](bundler|threaded-vm|reusable-vm|vm)|debug-replayer[\\/]index)\.js$/;

/** What must never be in the agent's bundle: Datum's workflows, the SDK's workflow bundler and sandbox. */
const FORBIDDEN_INPUTS =
  /^src[\\/]workflows[\\/]|node_modules[\\/](webpack|memfs|unionfs|@swc|swc-loader|source-map-loader|source-map)[\\/]/;

const WORKFLOW_STUB = `
// datum-agent serves activities only: the SDK's workflow bundler and sandboxes are left out.
const refuse = () => {
  throw new Error('datum-agent runs activities only and holds no workflow code; run workflows with \`datum worker\`');
};
module.exports = new Proxy({ defaultWorkflowInterceptorModules: [] }, {
  get: (own, name) => (name in own ? own[name] : name === '__esModule' ? undefined : refuse),
});
`;

const noWorkflowCode: Plugin = {
  name: 'datum-no-workflow-code',
  setup(b) {
    b.onLoad({ filter: WORKFLOW_MODULES }, () => ({ contents: WORKFLOW_STUB, loader: 'js' }));
  },
};

/** The entry: `datum-agent ARGS…` as a process (exit code, exit soon after a failure). */
const ENTRY = `
import { agentMain } from './src/cli/agent-main';
import { runAsProcess } from './src/cli/process';
runAsProcess('datum-agent', () => agentMain(process.argv.slice(2)));
`;

export interface AgentBundle {
  /** The bundled program. */
  file: string;
  bytes: number;
  /** The source files compiled into it (relative to the checkout), for the report and the licenses. */
  inputs: string[];
  /** esbuild's metafile, written beside the bundle as `<file>.meta.json` (not shipped). */
  metafile: Metafile;
}

/**
 * Bundles the agent into `file` (its directory must exist), run by `interpreter`: its #! line
 * names the node the package installs, so `datum-agent` runs where no node is on PATH.
 */
export async function bundleAgent(file: string, interpreter: string): Promise<AgentBundle> {
  const root = projectRoot();
  const result = await build({
    stdin: { contents: ENTRY, resolveDir: root, loader: 'ts', sourcefile: 'datum-agent.ts' },
    absWorkingDir: root,
    outfile: file,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    // package.json's engines: the oldest Node the agent runs on.
    target: 'node20',
    banner: { js: `#!${interpreter}` },
    // Minified (the program's source stays in the V8 heap: 3.1 MB instead of 4.2), but with the
    // names kept: classes and functions keep theirs, and so do stack traces.
    minify: true,
    keepNames: true,
    legalComments: 'none',
    plugins: [noWorkflowCode],
    metafile: true,
    logLevel: 'warning',
  });
  const output = result.metafile.outputs[path.relative(root, file)];
  if (!output) throw new PackagingError(`esbuild wrote no ${file}`, 'run `npm run package` again; report a bug if it persists');
  const inputs = Object.entries(output.inputs)
    .filter(([, input]) => input.bytesInOutput > 0)
    .map(([name]) => name);
  const forbidden = inputs.filter((name) => FORBIDDEN_INPUTS.test(name));
  if (forbidden.length > 0)
    throw new PackagingError(
      `the agent's bundle would hold workflow code: ${forbidden.slice(0, 5).join(', ')}`,
      'keep src/agent and what it imports free of src/workflows and of the workflow bundler (import types only)',
    );
  await writeFile(`${file}.meta.json`, JSON.stringify(result.metafile));
  return { file, bytes: output.bytes, inputs, metafile: result.metafile };
}
