// Lint is part of the safety story, not style: the rules below keep workflow code replayable,
// the domain core pure, the contract a leaf and the agent free of workflow code. Formatting is
// not linted.

import { builtinModules } from 'node:module';
import eslint from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import { layers } from './eslint.layers.mjs';
import { noCycle } from './eslint.cycles.mjs';

const WORKFLOW_FILES = ['src/workflows/**/*.ts', 'test/**/*-workflows.ts', 'bench/*-workflows.js'];
const DOMAIN_FILES = ['src/domain/**/*.ts'];
// The one module that calls Temporal's patched() and deprecatePatch().
const PATCH_ASKER = 'src/workflows/patches.ts';

// Every Node built-in under both spellings (`fs` and `node:fs`, `fs/promises` …). Node 20's
// list has no `node:` entries except prefix-only modules such as `node:test`; dedupe anyway.
const NODE_BUILTINS = [
  ...new Set(builtinModules.flatMap((name) => (name.startsWith('node:') ? [name] : [name, `node:${name}`]))),
];

const builtinRestrictions = (where) =>
  NODE_BUILTINS.map((name) => ({
    name,
    message: `Node built-ins are not allowed in ${where}: I/O belongs in activities (src/activities, src/agent).`,
  }));

// Who may import whom inside src/ (the `datum/layers` rule of eslint.layers.mjs resolves each
// relative import to the file it names). The contract is the leaf everyone shares, for types too;
// the domain is the pure core everyone calls; the workflow sandbox (workflows and the domain)
// never reaches zod or the schemas; the agent, a separate process on every node, never loads
// workflow or controller code; the services (codec, tracing) import only the contract.
const LAYERS = [
  {
    in: 'src/agent/',
    forbid: ['src/workflows/', 'src/activities/'],
    message: 'the node agent never loads workflow or controller code; names and wire types it shares come from src/contract.',
  },
  {
    in: 'src/domain/',
    forbid: ['src/workflows/', 'src/activities/', 'src/agent/', 'src/cli/', 'src/worker/'],
    message: 'src/domain is the pure core: the other parts call into it, never the reverse.',
  },
  {
    in: 'src/domain/',
    forbid: ['src/schemas/'],
    message:
      'src/domain runs in the workflow sandbox, where every loop evaluates its modules again: zod and the schemas stay at the edges (issue 19); check with the contract’s guards (src/contract/identifiers.ts, signals.ts).',
  },
  {
    in: 'src/domain/',
    packages: ['@noble/hashes'],
    message: 'src/domain loads only @noble/hashes at run time: it runs in the workflow sandbox (no zod there, issue 19).',
  },
  {
    in: 'src/domain/',
    forbid: ['src/contract/index', 'src/contract/names'],
    allowTypes: true,
    message:
      'import the contract module you need (identifiers, signals): its index and names.ts load @temporalio/common, and src/domain is Temporal-free.',
  },
  {
    in: 'src/contract/',
    forbid: ['src/', 'test/', 'bench/', 'scripts/'],
    except: ['src/contract/'],
    message:
      'src/contract is the leaf, for types too: it imports nothing from the project. A format or a closed set the contract needs moves into it.',
  },
  {
    in: 'src/contract/',
    packages: ['@temporalio/common', '@noble/hashes'],
    message:
      'src/contract loads only @temporalio/common and @noble/hashes at run time: the agent, the CLI and the workflow sandbox all load it (zod stays in src/schemas).',
  },
  {
    in: 'src/schemas/',
    forbid: ['src/workflows/', 'src/activities/', 'src/agent/', 'src/cli/', 'src/worker/', 'src/cluster/'],
    message: 'src/schemas are the formats’ zod schemas, which the edges import: they build on the contract and the domain only.',
  },
  {
    in: 'src/codec/',
    forbid: ['src/'],
    except: ['src/codec/', 'src/contract/'],
    message: 'src/codec is a service the worker, the agent, the CLI and the cluster load: it imports only src/contract.',
  },
  {
    in: 'src/tracing/',
    forbid: ['src/'],
    except: ['src/tracing/', 'src/contract/'],
    message:
      'src/tracing is a service every process loads: it imports only src/contract (withFix is src/contract/fix.ts, not the CLI).',
  },
  {
    in: 'src/cluster/',
    forbid: ['src/cli/', 'src/workflows/'],
    message: 'src/cluster launches the processes: it starts them as programs, never loads the CLI or the workflow code.',
  },
  {
    in: 'src/workflows/',
    forbid: ['src/activities/', 'src/agent/'],
    allowTypes: true,
    message:
      'workflows import activities only as types (`import type`, for proxyActivities<…>): activity code never runs in the sandbox.',
  },
  {
    in: 'src/workflows/',
    forbid: ['src/cli/', 'src/worker/'],
    message: 'workflow code runs in the sandbox; the CLI and the workers do not.',
  },
  {
    in: 'src/workflows/',
    forbid: ['src/schemas/'],
    message:
      'every loop evaluates the workflow bundle’s modules again: zod and the schemas stay at the edges (issue 19); check with the contract’s guards (isNodeId, parseSignal).',
  },
];

// The agent's filesystem zone (src/agent/index.ts is its map): only src/agent/fs/ touches a node's
// root, and node:fs is imported there and in the files below, each for the reason the map gives.
const AGENT_FS_EXCEPTIONS = ['src/agent/dpkg/busy.ts', 'src/agent/services/identity.ts', 'src/agent/services/systemd.ts'];
const AGENT_FS_MESSAGE =
  'only src/agent/fs/ touches a node root: reach it through its entry module (../fs), or add this file to the exceptions of src/agent/index.ts and eslint.config.mjs with its reason.';

const nonWorkflowTemporalPackages = (where) =>
  ['@temporalio/client', '@temporalio/worker', '@temporalio/activity', '@temporalio/testing'].map((name) => ({
    name,
    message: `${name} does not run in the workflow sandbox and is not allowed in ${where}.`,
  }));

export default tseslint.config(
  {
    ignores: ['dist/**', 'node_modules/**', '.venv/**', 'test-artifacts/**', 'coverage/**', '.datum/**', '.stryker-tmp/**'],
  },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          // Plain JS/ESM entry points outside tsconfig.json still get type information, so
          // type-aware rules (no-floating-promises) apply to them too.
          allowDefaultProject: [
            '*.mjs',
            'scripts/*.mjs',
            'scripts/*.cjs',
            'bench/*.mjs',
            'bench/*.js',
            'bin/*.js',
            'examples/*/*.js',
            'faults/*.mjs',
            'faults/app/*.js',
          ],
          // About 41 such files (the bench's scripts are most of them); the default cap is 8,
          // and going over the cap fails `eslint .` as a whole: leave room.
          maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 60,
        },
        tsconfigRootDir: import.meta.dirname,
      },
      globals: { ...globals.node },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // The shape of a function (STYLE.md): each stage reads on one screen. A function over the
    // limits is cut into named stages, or says in a comment beside its eslint-disable why not.
    files: ['src/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }],
      // ESLint counts every `??` and `?.` as a branch; 20 leaves room for defaults, not for ladders.
      complexity: ['error', 20],
      'max-depth': ['error', 4],
    },
  },
  {
    files: ['**/*.ts', '**/*.mts'],
    rules: {
      '@typescript-eslint/consistent-type-imports': ['error', { prefer: 'type-imports', fixStyle: 'inline-type-imports' }],
    },
  },
  {
    // JS files have no type annotations; the unsafe-any family would flag every JSON.parse.
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // CommonJS entry points (the bin shim; the demo app, which runs without a package.json).
    files: ['bin/*.js', 'bench/*.js'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // `env!` after a beforeAll that set it is the idiom of a test file.
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox (samples-typescript
    // .shared/.eslintrc.js): no Node built-ins, none of the SDK's non-workflow packages. A patch is
    // asked through the registry only (src/workflows/patches.ts), so each id is spelled once.
    files: WORKFLOW_FILES,
    ignores: [...DOMAIN_FILES, PATCH_ASKER],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...builtinRestrictions('workflow code'),
            ...nonWorkflowTemporalPackages('workflow code'),
            {
              name: '@temporalio/workflow',
              importNames: ['patched', 'deprecatePatch'],
              message: "ask a patch with inForce(<id from src/contract/patches.ts>) from './patches', never patched() itself.",
            },
          ],
        },
      ],
    },
  },
  {
    files: [PATCH_ASKER],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: [...builtinRestrictions('workflow code'), ...nonWorkflowTemporalPackages('workflow code')] },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { datum: { rules: { layers, 'no-cycle': noCycle } } },
    rules: {
      'datum/layers': ['error', LAYERS],
      // No import cycle in src/, type-only imports included (eslint.cycles.mjs).
      'datum/no-cycle': ['error', { dirs: ['src'] }],
    },
  },
  {
    files: ['src/agent/**/*.ts'],
    ignores: ['src/agent/fs/**', ...AGENT_FS_EXCEPTIONS],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: ['fs', 'node:fs', 'fs/promises', 'node:fs/promises'].map((name) => ({
            name,
            allowTypeImports: true,
            message: AGENT_FS_MESSAGE,
          })),
          patterns: [{ regex: '^\\.\\.?/(.*/)?fs/[^/]+$', message: AGENT_FS_MESSAGE }],
        },
      ],
    },
  },
  {
    // The contract is imported by the workflow sandbox and by the agent: no Node built-ins, and
    // none of the SDK's process-bound packages, not even as types (their definitions live in
    // @temporalio/common).
    files: ['src/contract/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...builtinRestrictions('src/contract'),
            ...[
              '@temporalio/workflow',
              '@temporalio/client',
              '@temporalio/worker',
              '@temporalio/activity',
              '@temporalio/testing',
            ].map((name) => ({
              name,
              message: `src/contract never imports ${name}: build definitions from @temporalio/common's types, so importing the contract loads no SDK runtime.`,
            })),
          ],
        },
      ],
    },
  },
  {
    // The domain core is pure and Temporal-free: time and randomness are passed in, so every
    // decision is a deterministic function of its inputs and runs unchanged inside a workflow.
    files: DOMAIN_FILES,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: builtinRestrictions('src/domain'),
          // All of @temporalio/* (client, worker, activity, workflow, common …).
          patterns: [
            {
              group: ['@temporalio/*'],
              message: 'src/domain is Temporal-free: workflows call into the domain, never the reverse.',
            },
          ],
        },
      ],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'No clock in src/domain: take `now` as a parameter.' },
        { object: 'Math', property: 'random', message: 'No randomness in src/domain: results must be deterministic.' },
        { object: 'performance', property: 'now', message: 'No clock in src/domain: take `now` as a parameter.' },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Date'][arguments.length=0]",
          message: 'No clock in src/domain: `new Date()` reads the current time; take `now` as a parameter.',
        },
        {
          selector: "CallExpression[callee.name='Date']",
          message: 'No clock in src/domain: `Date()` returns the current time as a string.',
        },
      ],
      'no-restricted-globals': [
        'error',
        ...['process', 'fetch', 'setTimeout', 'setInterval', 'setImmediate', 'crypto'].map((name) => ({
          name,
          message: `\`${name}\` is I/O, time or randomness; src/domain takes such inputs as parameters.`,
        })),
      ],
    },
  },
);
