import { createHash } from 'node:crypto';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { LineCounter, parseDocument, isMap, isPair, isScalar, type Node } from 'yaml';
import { InvalidInputError, artifactDigestFix, missingArtifactFix, type Problem, type ResourceSpec } from '../../domain';
import {
  MAX_AGENT_CONFIG_BYTES,
  MAX_DESIRED_STATE_BYTES,
  parseAgentConfigText,
  parseDesiredStateText,
  readAgentConfigText,
  type AgentNodeField,
} from '../../schemas/documents';
import { UsageError, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withFix } from '../errors';
import { print, printDocument, printLine } from '../output';
import type { CommandModule } from '../command';
import { DEFAULT_AGENT_CONFIG, fleetDirFrom } from '../dirs';
import { signatureProblems } from '../signature-check';

/*
 * `datum validate`: desired-state and agent.yaml files checked offline, with the parsers the
 * controller and the agent use (src/schemas/documents.ts), so a file that passes here is one they
 * accept. Every problem is located: the file, the line of the field (from yaml's source
 * positions), the field, what is wrong and the fix.
 */

type Kind = 'desired-state' | 'agent';

export interface LocatedProblem extends Problem {
  file: string;
  line: number | null;
  column: number | null;
}

export interface FileReport {
  file: string;
  kind: Kind | null;
  valid: boolean;
  problems: LocatedProblem[];
  /** An agent.yaml's node, and the field that named it: `node:`, seed 001's `host:`, or both (the same node). */
  agent?: { node: string; node_field: AgentNodeField };
}

interface ValidateRaw extends OutputFlags {
  files: string[];
  fleet?: string;
}

export interface ValidateInput {
  files: Array<{ file: string; kind: Kind | null; fleetDir: string | null }>;
  format: OutputFormat;
}

/** A file's kind by where it sits in a fleet (desired/nodes/, agents/); null: decided by its content. */
function kindByPath(file: string): Kind | null {
  const parts = path.resolve(file).split(path.sep);
  const parent = parts.at(-2);
  if (parent === 'nodes' && parts.at(-3) === 'desired') return 'desired-state';
  if (parent === 'agents' || path.basename(file) === 'agent.yaml') return 'agent';
  return null;
}

/**
 * The fleet directory a desired-state file's artifacts resolve against: --fleet when given, the
 * fleet it sits in (FLEET/desired/nodes/N.yaml), or the nearest directory above it that holds a
 * desired/nodes/ (a draft kept next to the fleet, such as examples/fleet/next/).
 */
function fleetOf(file: string, given: string | null): string | null {
  if (given) return given;
  let dir = path.dirname(path.resolve(file));
  for (; path.dirname(dir) !== dir; dir = path.dirname(dir)) if (existsSync(path.join(dir, 'desired', 'nodes'))) return dir;
  return null;
}

async function fleetFiles(fleetDir: string): Promise<ValidateInput['files']> {
  const list = async (dir: string, kind: Kind) =>
    (await fs.readdir(path.join(fleetDir, dir)).catch(() => [] as string[]))
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((f) => ({ file: path.join(fleetDir, dir, f), kind, fleetDir }));
  return [...(await list('desired/nodes', 'desired-state')), ...(await list('agents', 'agent'))];
}

export const validateCommand: CommandModule<ValidateRaw, ValidateInput> = {
  async input(values) {
    const format = outputFormat(values);
    if (values.files.length > 0) {
      const missing = values.files.filter((f) => !existsSync(f));
      if (missing.length > 0)
        throw new UsageError(withFix(`no such file: ${missing.join(', ')}`, 'name desired-state or agent.yaml files that exist'));
      const given = values.fleet !== undefined ? fleetDirFrom(values.fleet) : null;
      return { format, files: values.files.map((file) => ({ file, kind: kindByPath(file), fleetDir: fleetOf(file, given) })) };
    }
    if (values.fleet === undefined && process.env.DATUM_FLEET === undefined) {
      // On a node, the agent's own config where seed 001 puts it.
      if (existsSync(DEFAULT_AGENT_CONFIG))
        return { format, files: [{ file: DEFAULT_AGENT_CONFIG, kind: 'agent', fleetDir: null }] };
      throw new UsageError(
        withFix(
          'nothing to validate',
          `name FILES, or the fleet with --fleet DIR (or DATUM_FLEET); on a node, ${DEFAULT_AGENT_CONFIG} is checked when it exists`,
        ),
      );
    }
    const fleetDir = fleetDirFrom(values.fleet);
    return { format, files: await fleetFiles(fleetDir) };
  },
  async run({ files, format }) {
    const reports = await Promise.all(files.map((f) => validateFile(f.file, f.kind, f.fleetDir)));
    const problems = reports.flatMap((r) => r.problems);
    if (format === 'json') printDocument('json', { valid: problems.length === 0, files: reports });
    else if (format === 'jsonl') for (const p of problems) printLine(p);
    else {
      for (const p of problems) print(problemText(p));
      // Only a file that did not use Datum's own node: (the JSON report says it for every agent.yaml).
      for (const r of reports) if (r.agent && r.agent.node_field !== 'node') print(spellingLine(r.file, r.agent));
      const bad = reports.filter((r) => !r.valid).length;
      print(
        problems.length === 0
          ? `${reports.length} file(s) valid.`
          : `\n${problems.length} problem(s) in ${bad} of ${reports.length} file(s); nothing in an invalid file would be applied.`,
      );
    }
    return problems.length === 0 ? 0 : 1;
  },
};

/** Which spelling of the node a valid agent.yaml used, so a seed-001 file is seen to be read as meant. */
export function spellingLine(file: string, { node, node_field }: NonNullable<FileReport['agent']>): string {
  const by = {
    node: 'node:',
    host: "host: (seed 001's spelling of node:)",
    both: 'node: and host: (the same node in both spellings)',
  }[node_field];
  return `${file}: agent.yaml of node ${node}, named by ${by}`;
}

/** `file:line: field: problem — fix: fix`, the compiler shape CI annotates. */
export function problemText(p: LocatedProblem): string {
  const at = p.line === null ? p.file : `${p.file}:${p.line}${p.column !== null ? `:${p.column}` : ''}`;
  return `${at}: ${withFix(`${p.field}: ${p.problem}`, p.fix)}`;
}

export async function validateFile(file: string, byPath: Kind | null, fleetDir: string | null): Promise<FileReport> {
  const shown = path.relative(process.cwd(), file) || file;
  const fail = (problems: Problem[], kind: Kind | null, text = ''): FileReport => ({
    file: shown,
    kind,
    valid: false,
    problems: locate(problems, text, shown),
  });
  let text: string;
  try {
    const stat = await fs.stat(file);
    if (!stat.isFile()) return fail([{ field: '(file)', problem: 'is not a regular file', fix: 'name a YAML file' }], byPath);
    if (stat.size > Math.max(MAX_DESIRED_STATE_BYTES, MAX_AGENT_CONFIG_BYTES) * 4)
      return fail(
        [{ field: '(file)', problem: `is ${stat.size} bytes`, fix: 'name a desired-state or agent.yaml file' }],
        byPath,
      );
    text = await fs.readFile(file, 'utf8');
  } catch (error) {
    return fail([{ field: '(file)', problem: `cannot be read (${(error as Error).message})`, fix: 'make it readable' }], byPath);
  }
  const kind = byPath ?? kindByContent(text);
  // Not YAML at all: the parsers' own syntax errors (with their lines) say more than "unknown kind".
  if (kind === null && parseDocument(text).errors.length > 0) return fail(problemsOf(syntaxError(text, shown)), null, text);
  if (kind === null)
    return fail(
      [
        {
          field: '(file)',
          problem: 'is neither desired state (node, generation, resources) nor an agent.yaml (node or host, root)',
          fix: 'put it under FLEET/desired/nodes/ or FLEET/agents/, or give it the fields of one of them',
        },
      ],
      null,
      text,
    );
  if (kind === 'agent') {
    const { problems, agent } = agentProblems(text, shown, file);
    return problems.length ? fail(problems, kind, text) : { file: shown, kind, valid: true, problems: [], agent };
  }
  const problems = await desiredProblems(text, shown, file, fleetDir);
  return problems.length ? fail(problems, kind, text) : { file: shown, kind, valid: true, problems: [] };
}

function kindByContent(text: string): Kind | null {
  try {
    const data = parseDocument(text).toJS() as Record<string, unknown> | null;
    if (data && typeof data === 'object') {
      if ('resources' in data || 'generation' in data) return 'desired-state';
      if ('root' in data || 'host' in data || 'reconciliation' in data || 'overrides' in data) return 'agent';
    }
  } catch {
    // Unparseable: the caller reports that the kind is unknown.
  }
  return null;
}

function syntaxError(text: string, shown: string): unknown {
  try {
    parseAgentConfigText(text, shown);
    return null;
  } catch (error) {
    return error;
  }
}

function problemsOf(error: unknown): Problem[] {
  if (error instanceof InvalidInputError) return error.problems;
  return [{ field: '(file)', problem: `cannot be read (${String(error).slice(0, 200)})`, fix: 'correct the file' }];
}

async function desiredProblems(text: string, shown: string, file: string, fleetDir: string | null): Promise<Problem[]> {
  const expected = kindByPath(file) === 'desired-state' ? path.basename(file, '.yaml') : undefined;
  let intent;
  try {
    intent = parseDesiredStateText(
      text,
      shown,
      { revision: 'validate', author: null, loaded_at: new Date(0).toISOString() },
      expected,
    );
  } catch (error) {
    return problemsOf(error);
  }
  return [
    ...(await artifactProblems(intent.resources, fleetDir ?? path.dirname(file))),
    ...(await signatureProblems(file, text, intent, fleetDir)),
  ];
}

/**
 * What the controller or the agent would refuse beyond the schema: a local artifact (a release's
 * archive, a package's .deb) that is missing or is not the bytes its sha256 names.
 */
async function artifactProblems(resources: Record<string, ResourceSpec>, base: string): Promise<Problem[]> {
  const problems: Problem[] = [];
  for (const [key, spec] of Object.entries(resources)) {
    if (!('artifact' in spec) || !spec.artifact || /^https?:\/\//i.test(spec.artifact)) continue;
    const absolute = path.resolve(base, spec.artifact);
    let bytes: Buffer;
    try {
      bytes = await fs.readFile(absolute);
    } catch {
      problems.push({
        field: `resources.${key}.artifact`,
        problem: `${spec.artifact} does not exist (looked at ${absolute})`,
        fix: missingArtifactFix(spec.type),
      });
      continue;
    }
    const actual = createHash('sha256').update(bytes).digest('hex');
    if (actual !== spec.sha256)
      problems.push({
        field: `resources.${key}.sha256`,
        problem: `is not the sha256 of ${spec.artifact} (${actual})`,
        fix: artifactDigestFix(spec.type),
      });
  }
  return problems;
}

function agentProblems(text: string, shown: string, file: string): { problems: Problem[]; agent?: FileReport['agent'] } {
  let read;
  try {
    read = readAgentConfigText(text, shown);
  } catch (error) {
    return { problems: problemsOf(error) };
  }
  const { config, nodeField } = read;
  const field = nodeField === 'host' ? 'host' : 'node';
  const expected = kindByPath(file) === 'agent' && path.basename(file) !== 'agent.yaml' ? path.basename(file, '.yaml') : null;
  if (expected !== null && config.node !== expected)
    return {
      problems: [
        {
          field,
          problem: `names "${config.node}" but the file is the agent.yaml of node "${expected}" (FLEET/agents/<node>.yaml)`,
          fix: `write ${field}: ${expected}, or rename the file to ${config.node}.yaml`,
        },
      ],
    };
  return { problems: [], agent: { node: config.node, node_field: nodeField } };
}

// ---------------------------------------------------------------------------------------------
// Where a field is: its line in the file, from yaml's source positions.

/** "resources.build.sha256", "resources.app.command[0]" → the keys and indexes of the path. */
function segments(field: string): Array<string | number> {
  const out: Array<string | number> = [];
  for (const m of field.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : m[1]);
  return out;
}

/** The node at the deepest part of `path` the document has, and whether it is the whole path. */
function deepest(root: unknown, path: Array<string | number>): Node | null {
  let node = root as Node | null;
  let found: Node | null = node;
  for (const seg of path) {
    if (!node || typeof node !== 'object' || !('items' in node)) break;
    const items = (node as { items: unknown[] }).items;
    const next = isMap(node)
      ? items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg))
      : items[Number(seg)];
    if (next === undefined) break;
    const pair = next as { key?: Node; value?: Node | null };
    // A key with no value (`content:`) is located at its key.
    found = (isPair(next) ? (pair.value ?? pair.key) : (next as Node)) ?? found;
    node = isPair(next) ? (pair.value ?? null) : (next as Node);
  }
  return found;
}

function locate(problems: Problem[], text: string, file: string): LocatedProblem[] {
  const lines = new LineCounter();
  let doc: ReturnType<typeof parseDocument> | null = null;
  try {
    doc = text ? parseDocument(text, { lineCounter: lines }) : null;
  } catch {
    doc = null;
  }
  return problems.map((p) => {
    const written = /^\(line (\d+)(?:, column (\d+))?\)$/.exec(p.field);
    if (written) return { ...p, file, line: Number(written[1]), column: written[2] ? Number(written[2]) : null };
    const node = doc && p.field !== '(file)' ? deepest(doc.contents, segments(p.field)) : null;
    const offset = node?.range?.[0];
    if (offset === undefined) return { ...p, file, line: null, column: null };
    const at = lines.linePos(offset);
    return { ...p, file, line: at.line, column: at.col };
  });
}
