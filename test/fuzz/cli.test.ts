import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FIX } from '../../src/contract';
import { UsageError } from '../../src/cli/args';
import { parseOnly } from '../../src/cli/main';
import { RUNS } from './generators';
import { nodeId } from '../../src/schemas';

/*
 * Fuzzing the `datum` CLI's arguments (issue 10, must-show 2), in-process: each command's parse
 * layer (the function its `run` calls first, before it connects to anything, reads a file or
 * starts a process) gets argv built from that command's own options, mixed with unknown options,
 * missing and hostile values and stray positionals. Each ends as parsed arguments that hold what
 * the command needs, or as a UsageError (exit 2) that names the option and the fix; nothing else.
 */

type ArgsFn = (argv: string[]) => unknown;

/** A command's parse layer, in-process: argv → its checked input, or a UsageError. */
const parse =
  (...command: string[]): ArgsFn =>
  (argv) =>
    parseOnly([...command, ...argv]);

interface Surface {
  fn: ArgsFn;
  /** Argument lists the command accepts: what the mutations start from. */
  base: fc.Arbitrary<string[]>;
  /** The command's value options and flags. */
  values: string[];
  flags: string[];
  /** What a parsed result must hold. */
  check?: (result: never) => void;
}

const aNode = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,8}$/);
const justNode = aNode.map((n) => [n]);
const none = fc.constant<string[]>([]);
const node = (r: { node: string }) => expect(nodeId.safeParse(r.node).success).toBe(true);
const COMMANDS: Record<string, Surface> = {
  describe: { fn: parse('describe'), base: justNode, values: ['address', 'namespace'], flags: ['json'], check: node },
  ledger: { fn: parse('ledger'), base: justNode, values: ['since', 'data'], flags: ['json'], check: node },
  refresh: { fn: parse('refresh'), base: justNode, values: ['fleet', 'address', 'namespace'], flags: ['json'], check: node },
  status: { fn: parse('status'), base: none, values: ['address', 'namespace'], flags: ['json'] },
  worker: {
    fn: parse('worker'),
    base: none,
    values: ['fleet', 'data', 'task-queue', 'address', 'namespace', 'metrics-address'],
    flags: [],
  },
  agent: {
    fn: parse('agent'),
    base: fc
      .array(fc.constantFrom('a.yaml', '/etc/datum/N-1.yaml'), { minLength: 1, maxLength: 3 })
      .map((cs) => cs.flatMap((c) => ['--config', c])),
    values: ['config', 'address', 'namespace', 'metrics-address'],
    flags: [],
    check: (r: { configPaths: string[] }) => expect(r.configPaths.length).toBeGreaterThan(0),
  },
  dev: {
    fn: parse('dev'),
    base: fc.integer({ min: 1, max: 65535 }).map((p) => ['--port', String(p)]),
    values: ['fleet', 'port', 'ui-port', 'data'],
    flags: [],
    check: (r: { port: number; uiPort: number }) => {
      for (const p of [r.port, r.uiPort]) expect(Number.isInteger(p) && p >= 1 && p <= 65535).toBe(true);
    },
  },
  resolve: {
    fn: parse('resolve'),
    base: fc
      .tuple(
        aNode,
        fc.stringMatching(/^[a-z][a-z0-9_-]{0,8}$/),
        fc.constantFrom('retake', 'yield'),
        fc.string({ minLength: 1, maxLength: 12 }),
      )
      .map(([n, k, r, by]) => [n, '--resource', k, '--resolution', r, `--by=${by}`]),
    values: ['resource', 'resolution', 'by', 'note', 'address', 'namespace'],
    flags: ['json'],
    check: (r: { node: string; parsed: { ok: boolean } }) => {
      node(r);
      expect(r.parsed.ok).toBe(true);
    },
  },
  rollout: {
    fn: parse('rollout', 'start'),
    base: fc
      .tuple(fc.integer({ min: 1, max: 10_000 }), fc.uniqueArray(aNode, { minLength: 1, maxLength: 4 }))
      .map(([g, ns]) => ['--generation', String(g), '--nodes', ns.join(',')]),
    values: ['generation', 'nodes', 'fleet', 'address', 'namespace'],
    flags: ['all', 'wait', 'json'],
    check: (r: { generation: number; nodes: string[] }) => {
      expect(Number.isInteger(r.generation) && r.generation >= 1).toBe(true);
      expect(new Set(r.nodes).size).toBe(r.nodes.length);
      for (const n of r.nodes) expect(nodeId.safeParse(n).success).toBe(true);
    },
  },
};

/** Values an operator (or a script gone wrong) might pass. */
const value = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,12}$/),
  fc.constantFrom(
    '',
    '-',
    '--',
    '-1',
    '0',
    '1',
    '12',
    '65536',
    '7233',
    'retake',
    'yield',
    'N-1,N-2',
    'N-1,N-1',
    'a,,b',
    '1e3',
    '0x10',
    ' 12 ',
  ),
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 10 }),
  fc.integer({ min: 1, max: 400 }).map((n) => 'x'.repeat(n * 50)),
);

function argvFor(s: Surface): fc.Arbitrary<string[]> {
  const token = fc.oneof(
    { weight: 4, arbitrary: fc.tuple(fc.constantFrom(...s.values), value).map(([o, v]) => [`--${o}`, v]) },
    { weight: 2, arbitrary: fc.tuple(fc.constantFrom(...s.values), value).map(([o, v]) => [`--${o}=${v}`]) },
    ...(s.flags.length ? [{ weight: 2, arbitrary: fc.constantFrom(...s.flags).map((f) => [`--${f}`]) }] : []),
    { weight: 1, arbitrary: fc.constantFrom(...s.values).map((o) => [`--${o}`]) },
    { weight: 1, arbitrary: fc.stringMatching(/^-{1,2}[a-z-]{1,8}$/).map((o) => [o]) },
    { weight: 2, arbitrary: value.map((v) => [v]) },
    { weight: 1, arbitrary: fc.constantFrom(['-h'], ['--'], ['-'], ['--json=yes']) },
  );
  const tokens = fc.array(token, { maxLength: 6 }).map((ts) => ts.flat());
  // A valid command line, as is or with a few tokens spliced in; or tokens alone.
  return fc.oneof(
    s.base,
    fc.tuple(s.base, fc.array(token, { minLength: 1, maxLength: 2 }), fc.nat()).map(([b, extra, at]) => {
      const out = [...b];
      out.splice(at % (out.length + 1), 0, ...extra.flat());
      return out;
    }),
    tokens,
  );
}

describe('fuzzing CLI arguments', () => {
  const saved = { fleet: process.env.DATUM_FLEET };
  for (const [name, s] of Object.entries(COMMANDS)) {
    it(`datum ${name}: ${RUNS} argument lists end as parsed arguments or a UsageError naming the option and the fix`, async () => {
      delete process.env.DATUM_FLEET;
      try {
        await fc.assert(
          fc.asyncProperty(argvFor(s), async (argv) => {
            let result: unknown;
            try {
              result = await s.fn(argv);
            } catch (error) {
              if (!(error instanceof UsageError))
                throw new Error(`untyped error for ${JSON.stringify(argv)}: ${String(error)}`, { cause: error });
              expect(error.message.length).toBeGreaterThan(0);
              expect(error.message.includes(FIX) || error.message.includes('(fix: ')).toBe(true);
              return;
            }
            // -h anywhere shows the command's help instead of running it (commander).
            if ((result as { help?: boolean } | undefined)?.help === true) return;
            s.check?.(result as never);
          }),
          { numRuns: RUNS },
        );
      } finally {
        if (saved.fleet !== undefined) process.env.DATUM_FLEET = saved.fleet;
      }
    }, 120_000);
  }
});
