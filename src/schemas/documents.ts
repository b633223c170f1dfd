import { Composer, LineCounter, Parser, isAlias, isMap, isScalar, isSeq, visit, type CST, type Document } from 'yaml';
import type { BoundIntent, DesiredProvenance, DesiredState, ResourceSpec } from '../contract/desired';
import type { Problem } from '../contract/fix';
import { RESOURCE_TYPES } from '../contract/vocabulary';
import { breachProblem, jsonBreach, pathOf, type Frame, type JsonBreach } from '../domain/bounds';
import { bindIntent } from '../domain/desired';
import { kindOf } from '../domain/resources';
import { InvalidAgentConfig, InvalidDesiredState, type InvalidInputError } from '../domain/errors';
import { RELEASE_TARGET, pathsUnderFiles, sharedTargets, targetOf } from '../domain/targets';
import { resourceKey } from './base';
import { agentConfig, desiredStateFile, normalizePolicy, resourceSpec, type AgentConfig } from './desired';
import { problemsFromZod } from './problems';

/*
 * Text → validated documents. Pure (no file access): callers read the bytes and pass them in
 * with the path they came from, so every error can name the file.
 *
 * Input caps (docs/architecture.md §3 "Input caps"). Every file from outside is checked against
 * them before and while it is parsed, without recursion where the input decides the depth, so
 * no file (an alias bomb, a value nested thousands deep, a huge file) can exhaust the memory or
 * the stack of whoever reads it: it ends as InvalidDesiredState / InvalidAgentConfig, the typed
 * outcome of any invalid file. Callers that read from disk also check the byte cap against the
 * file's size before reading it (MAX_DESIRED_STATE_BYTES, MAX_AGENT_CONFIG_BYTES).
 */

/** Bytes of one desired-state file: the bound intent travels in workflow history on every read. */
export const MAX_DESIRED_STATE_BYTES = 262_144;
/** Bytes of one agent.yaml: a node, a root, modes and overrides need a few hundred. */
export const MAX_AGENT_CONFIG_BYTES = 65_536;
/** Nesting of mappings and sequences, in the text and once aliases are expanded. */
export const MAX_DOCUMENT_DEPTH = 32;
/** Values in a document once aliases are expanded (each use of an anchor counts again). */
export const MAX_DOCUMENT_VALUES = 100_000;
/** The yaml package's own `maxAliasCount`: how far aliases may multiply what they refer to. */
export const MAX_YAML_ALIASES = 100;

interface Kind {
  name: 'desired' | 'agent';
  /** The cap's constant, named in the error so the docs can be found. */
  bytesCap: 'MAX_DESIRED_STATE_BYTES' | 'MAX_AGENT_CONFIG_BYTES';
  maxBytes: number;
  fail: (problems: Problem[]) => InvalidInputError;
}

const DESIRED: Omit<Kind, 'fail'> = { name: 'desired', bytesCap: 'MAX_DESIRED_STATE_BYTES', maxBytes: MAX_DESIRED_STATE_BYTES };
const AGENT: Omit<Kind, 'fail'> = { name: 'agent', bytesCap: 'MAX_AGENT_CONFIG_BYTES', maxBytes: MAX_AGENT_CONFIG_BYTES };

const whole = (problem: string, fix: string): Problem[] => [{ field: '(file)', problem, fix }];

const ALIAS_FIX = 'write the values out instead of repeating them through aliases (*name), or use fewer aliases';
const BREACH_FIX: Record<JsonBreach['cap'], string> = {
  depth: `nest mappings and sequences at most ${MAX_DOCUMENT_DEPTH} levels deep (a file's content can also be a string)`,
  values: `keep the document under ${MAX_DOCUMENT_VALUES} values once its aliases are expanded: ${ALIAS_FIX}`,
  chars: `keep the document small once its aliases are expanded: ${ALIAS_FIX}`,
  type: 'write plain values: strings, finite numbers, booleans, null, mappings and sequences (no .inf, .nan, timestamps, binary or other tags)',
};
const CAP_NAME: Record<JsonBreach['cap'], string> = {
  depth: 'MAX_DOCUMENT_DEPTH',
  values: 'MAX_DOCUMENT_VALUES',
  chars: 'twice the byte cap',
  type: 'JSON values only',
};

/** Size in UTF-8 bytes, without encoding the text (src/domain has no Buffer). */
export function utf8Bytes(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c < 0xdc00 ? 4 : c >= 0xdc00 && c < 0xe000 ? 0 : 3;
  }
  return n;
}

/** The error for a file over its byte cap; exported for callers that check the size on disk first. */
export function tooLarge(kind: 'desired' | 'agent', bytes: number): Problem[] {
  const k = kind === 'desired' ? DESIRED : AGENT;
  return whole(
    `is ${bytes} bytes, more than the ${k.maxBytes} bytes Datum reads (${k.bytesCap})`,
    kind === 'desired'
      ? "keep desired state small: move large file contents into the release's artifact"
      : 'agent.yaml holds only the node, root, modes and overrides: remove whatever else is in it',
  );
}

/** 1. Before parsing: the size and the bytes themselves. */
function textProblems(text: string, kind: Kind): Problem[] | null {
  if (text.length > kind.maxBytes || (text.length * 3 > kind.maxBytes && utf8Bytes(text) > kind.maxBytes))
    return tooLarge(kind.name, utf8Bytes(text));
  if (text.includes('\u0000')) return whole('is binary, not YAML', 'point Datum at the YAML text file');
  return null;
}

/**
 * 2. While parsing: the nesting of the text, on yaml's syntax tree (its Parser keeps its own
 * stack, and this walk uses one too); only a text within the cap reaches the composer and
 * toJS, which recurse.
 */
function depthInText(tokens: CST.Token[], lines: LineCounter): Problem[] | null {
  const stack = tokens.map((token) => ({ token, depth: 0 }));
  for (let next = stack.pop(); next; next = stack.pop()) {
    const { token, depth } = next;
    if (token.type === 'document' && token.value) stack.push({ token: token.value, depth });
    if (token.type !== 'block-map' && token.type !== 'block-seq' && token.type !== 'flow-collection') continue;
    if (depth + 1 > MAX_DOCUMENT_DEPTH) {
      return [
        {
          field: `(line ${lines.linePos(token.offset).line})`,
          problem: `is nested deeper than ${MAX_DOCUMENT_DEPTH} levels (MAX_DOCUMENT_DEPTH)`,
          fix: BREACH_FIX.depth,
        },
      ];
    }
    for (const item of token.items) {
      if (item.key) stack.push({ token: item.key, depth: depth + 1 });
      if (item.value) stack.push({ token: item.value, depth: depth + 1 });
    }
  }
  return null;
}

/** The text's one document, composed from the syntax tree already parsed; errors and warnings as problems. */
function compose(tokens: CST.Token[], text: string, lines: LineCounter): Document.Parsed | Problem[] {
  const docs = [...new Composer({ uniqueKeys: true, strict: true }).compose(tokens, true, text.length)];
  if (docs.length > 1)
    return whole('holds more than one YAML document ("---")', 'keep one document per file: remove the "---" and what follows');
  const [doc] = docs;
  if (!doc) return whole('is empty', 'write the document as key: value pairs, as docs/configuration.md shows');
  // Warnings too: an unresolved tag or a YAML 1.1 feature would otherwise pass as something else.
  const syntax = [...doc.errors, ...doc.warnings];
  if (syntax.length === 0) return doc;
  return syntax.map((e) => {
    const at = lines.linePos(e.pos[0]);
    return {
      field: `(line ${at.line}, column ${at.col})`,
      problem: `is not valid YAML: ${e.message.split('\n')[0]}`,
      fix: 'correct the YAML syntax (indentation, quotes, colons, tags) at that position',
    };
  });
}

/** The top-level field a frame is under: where an expansion that passed a cap started. */
function topField(frame: Frame): string {
  let f = frame;
  while (f.parent && f.parent.key !== null) f = f.parent;
  return f.key === null ? '(file)' : String(f.key);
}

/** Each alias's anchored node, found as yaml does (the last anchor of that name before it), in one pass. */
function aliasTargets(doc: Document.Parsed): Map<unknown, unknown> {
  const anchors = new Map<string, unknown>();
  const targets = new Map<unknown, unknown>();
  visit(doc, {
    Node(_key, node) {
      if (isAlias(node)) targets.set(node, anchors.get(node.source));
      else if (node.anchor) anchors.set(node.anchor, node);
    },
  });
  return targets;
}

/**
 * 3. After parsing, before any value is built: the document as its aliases expand it (what an
 * alias bomb multiplies), walked with an explicit stack. A key that is itself a mapping or a
 * sequence is refused here too: as data it would be flattened into a string.
 */
function expandedProblems(doc: Document.Parsed): Problem[] | null {
  const targets = aliasTargets(doc);
  const stack: Frame[] = [{ value: doc.contents, depth: 0, parent: null, key: null }];
  let values = 0;
  for (let frame = stack.pop(); frame; frame = stack.pop()) {
    const node = isAlias(frame.value) ? targets.get(frame.value) : frame.value;
    const at = () => pathOf(frame, '(file)');
    if (++values > MAX_DOCUMENT_VALUES)
      return [
        {
          field: topField(frame),
          problem: `holds more than ${MAX_DOCUMENT_VALUES} values once its aliases are expanded (MAX_DOCUMENT_VALUES)`,
          fix: BREACH_FIX.values,
        },
      ];
    if (!isMap(node) && !isSeq(node)) continue;
    if (frame.depth + 1 > MAX_DOCUMENT_DEPTH)
      return [
        {
          field: at(),
          problem: `is nested deeper than ${MAX_DOCUMENT_DEPTH} levels once its aliases are expanded (MAX_DOCUMENT_DEPTH)`,
          fix: BREACH_FIX.depth,
        },
      ];
    const depth = frame.depth + 1;
    if (isSeq(node)) {
      node.items.forEach((item, i) => stack.push({ value: item, depth, parent: frame, key: i }));
      continue;
    }
    for (const pair of node.items) {
      const key = pair.key;
      if (!isScalar(key) && key !== null)
        return [
          { field: at(), problem: 'has a key that is a mapping, a sequence or an alias', fix: 'write every key as plain text' },
        ];
      stack.push({ value: pair.value, depth, parent: frame, key: keyName(key) });
    }
  }
  return null;
}

/**
 * A key's name as a field path spells it. Not every key's value is JSON: YAML 1.1's merge key `<<`
 * is a symbol, which JSON.stringify leaves undefined, so a symbol is named by its description.
 */
function keyName(key: { value: unknown } | null): string {
  const value = key?.value;
  if (value === null || value === undefined) return '';
  if (typeof value === 'symbol') return value.description ?? '';
  if (typeof value === 'bigint') return value.toString();
  return (JSON.stringify(value) ?? '').replace(/^"|"$/g, '');
}

/** Why yaml could not build the data: each of its refusals with the fix that answers it. */
function buildProblem(message: string): Problem[] {
  if (/excessive alias count/i.test(message))
    return whole(
      `uses aliases beyond what Datum reads (maxAliasCount ${MAX_YAML_ALIASES}, MAX_YAML_ALIASES): ${message}`,
      ALIAS_FIX,
    );
  if (/merge sources/i.test(message))
    return whole(
      `has a YAML 1.1 merge key (<<) whose value is not a mapping: ${message}`,
      'merge only mappings (<<: *name, where name anchors a mapping), or write the keys out',
    );
  return whole(`cannot be read as data: ${message}`, 'correct the YAML at the value the message names');
}

/** 4. The data, built with yaml's own alias limit, then checked to be plain JSON within the caps. */
function toData(doc: Document.Parsed, kind: Kind): unknown {
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (error) {
    throw kind.fail(buildProblem((error as Error).message));
  }
  const breach = jsonBreach(data, { depth: MAX_DOCUMENT_DEPTH, chars: 2 * kind.maxBytes, values: MAX_DOCUMENT_VALUES });
  if (breach) {
    const field = breach.field === '(payload)' ? '(file)' : breach.field;
    throw kind.fail([{ field, problem: `${breachProblem(breach)} (${CAP_NAME[breach.cap]})`, fix: BREACH_FIX[breach.cap] }]);
  }
  return data;
}

function parseYaml(text: string, kind: Kind): unknown {
  const before = textProblems(text, kind);
  if (before) throw kind.fail(before);
  // One parse: the syntax tree is checked for depth, then composed into the document.
  const lines = new LineCounter();
  const tokens = [...new Parser(lines.addNewLine).parse(text)];
  const deep = depthInText(tokens, lines);
  if (deep) throw kind.fail(deep);
  const doc = compose(tokens, text, lines);
  if (Array.isArray(doc)) throw kind.fail(doc);
  const expanded = expandedProblems(doc);
  if (expanded) throw kind.fail(expanded);
  const data = toData(doc, kind);
  if (data === null || typeof data !== 'object' || Array.isArray(data))
    throw kind.fail(whole('is not a YAML mapping', 'write the document as key: value pairs, as docs/configuration.md shows'));
  return data;
}

export function parseDesiredStateText(
  text: string,
  source: string,
  provenance: Omit<DesiredProvenance, 'source'>,
  expectedNode?: string,
): BoundIntent {
  const data = parseYaml(text, { ...DESIRED, fail: (p) => new InvalidDesiredState(source, p) });
  return bindIntent(validateDesiredState(data, source, expectedNode), { source, ...provenance });
}

export function parseAgentConfigText(text: string, source: string): AgentConfig {
  return readAgentConfigText(text, source).config;
}

/**
 * Which field an agent.yaml named its node with: `node` (Datum's), `host` (seed 001's spelling:
 * `host: web-001` beside `reconciliation.mode`), or `both` (the two, naming the same node).
 */
export type AgentNodeField = 'node' | 'host' | 'both';

/** An agent.yaml, and which spelling of its node it used (`datum validate` says which). */
export function readAgentConfigText(text: string, source: string): { config: AgentConfig; nodeField: AgentNodeField } {
  const data = parseYaml(text, { ...AGENT, fail: (p) => new InvalidAgentConfig(source, p) });
  // parseYaml returns only a mapping (anything else is refused as "is not a YAML mapping").
  const { spelled, nodeField } = hostAsNode(data as Record<string, unknown>, source);
  return { config: validateAgentConfig(spelled, source, nodeField), nodeField };
}

export function validateAgentConfig(data: unknown, source: string, nodeField: AgentNodeField = 'node'): AgentConfig {
  const parsed = agentConfig.safeParse(data, { reportInput: true });
  if (!parsed.success) {
    const problems = problemsFromZod(parsed.error);
    // A bad `host:` is named as the user wrote it, not as the field it stands for.
    throw new InvalidAgentConfig(
      source,
      nodeField === 'host' ? problems.map((p) => (p.field === 'node' ? { ...p, field: 'host' } : p)) : problems,
    );
  }
  return parsed.data;
}

/**
 * Seed 001 names the node `host:`; Datum's own spelling is `node:`. Either is read as the node;
 * both at once must name the same node, or nobody can tell which node this agent serves.
 */
function hostAsNode(
  data: Record<string, unknown>,
  source: string,
): { spelled: Record<string, unknown>; nodeField: AgentNodeField } {
  if (!Object.hasOwn(data, 'host')) return { spelled: data, nodeField: 'node' };
  const { host, ...rest } = data;
  if (!Object.hasOwn(rest, 'node')) return { spelled: { ...rest, node: host }, nodeField: 'host' };
  if (rest.node !== host)
    throw new InvalidAgentConfig(source, [
      {
        field: 'host',
        problem: `names ${JSON.stringify(host)} but node: names ${JSON.stringify(rest.node)} (host: is seed 001's spelling of node:, so both name the node this agent serves)`,
        fix: "keep one of them: node: (Datum's spelling) or host:, naming the node this agent serves",
      },
    ]);
  return { spelled: rest, nodeField: 'both' };
}

// ---------------------------------------------------------------------------------------------
// Desired state: the file, then each resource, so one run reports every problem in it.

/**
 * Validates a parsed desired-state document. Throws InvalidDesiredState naming the file, every
 * bad field and its fix; returns nothing partial, so no node ever acts on half a file.
 */
export function validateDesiredState(data: unknown, source: string, expectedNode?: string): DesiredState {
  const top = desiredStateFile.safeParse(data, { reportInput: true });
  const problems: Problem[] = [];
  if (!top.success) {
    problems.push(...problemsFromZod(top.error));
    if (!top.data) {
      // Still check the resources we can reach, so one run shows every problem in the file.
      const raw = (data && typeof data === 'object' ? (data as Record<string, unknown>).resources : undefined) ?? {};
      if (raw && typeof raw === 'object') checkResources(raw as Record<string, unknown>, problems);
      throw new InvalidDesiredState(source, dedupe(problems));
    }
  }
  const doc = top.data;
  if (expectedNode !== undefined && doc.node !== expectedNode) {
    problems.push({
      field: 'node',
      problem: `names "${doc.node}" but the file is for node "${expectedNode}"`,
      fix: `write node: ${expectedNode}, or rename the file to ${doc.node}.yaml`,
    });
  }
  const resources = checkResources(doc.resources, problems);
  if (problems.length > 0) throw new InvalidDesiredState(source, dedupe(problems));
  const expires = doc.expires === undefined ? {} : { expires: new Date(doc.expires).toISOString() };
  return {
    node: doc.node,
    generation: doc.generation,
    ...(doc.labels && Object.keys(doc.labels).length > 0 ? { labels: doc.labels } : {}),
    resources,
    policy: normalizePolicy(doc.policy),
    ...expires,
  };
}

function checkResources(raw: Record<string, unknown>, problems: Problem[]): Record<string, ResourceSpec> {
  const out: Record<string, ResourceSpec> = {};
  for (const [key, value] of Object.entries(raw)) {
    const keyCheck = resourceKey.safeParse(key);
    if (!keyCheck.success) problems.push(...problemsFromZod(keyCheck.error, ['resources', key]));
    const type = value && typeof value === 'object' ? (value as { type?: unknown }).type : undefined;
    if (typeof type !== 'string' || !(RESOURCE_TYPES as readonly string[]).includes(type)) {
      problems.push({
        field: `resources.${key}.type`,
        problem: type === undefined ? 'is missing' : `unknown resource type ${JSON.stringify(type)}`,
        fix: `use one of ${RESOURCE_TYPES.join(', ')}`,
      });
      continue;
    }
    const parsed = resourceSpec.safeParse(value, { reportInput: true });
    if (!parsed.success) problems.push(...problemsFromZod(parsed.error, ['resources', key]));
    else out[key] = parsed.data;
  }
  problems.push(...sharedTargetProblems(out));
  // What a resource names elsewhere in the file (a service's release and config) must be there, with its type.
  const rawType = (k: string) => (raw[k] && typeof raw[k] === 'object' ? (raw[k] as { type?: unknown }).type : undefined);
  for (const [key, r] of Object.entries(out)) {
    for (const ref of kindOf(r).references(r)) {
      // A reference to a resource that failed validation already has its own problem above.
      if (rawType(ref.key) === ref.type) continue;
      problems.push({
        field: `resources.${key}.${ref.field}`,
        problem: `"${ref.key}" is not a${/^[aeiou]/.test(ref.type) ? 'n' : ''} ${ref.type} resource of this node`,
        fix: `name the key of a resource with type: ${ref.type}`,
      });
    }
  }
  return out;
}

/**
 * Two resources may not claim one target (docs/architecture.md §4 "Targets and operator
 * decisions"): two files at one path, a file and a directory at one path, or two releases, which
 * would both switch the one current. Nor may a file's path be a parent of another path resource's:
 * the one needs a file where the other needs a directory.
 */
function sharedTargetProblems(resources: Record<string, ResourceSpec>): Problem[] {
  const shared = sharedTargets(resources).map(({ target, keys }) => {
    const spelled = [...new Set(keys.map((k) => targetOf(k, resources[k])))];
    return {
      field: `resources.${keys[keys.length - 1] ?? ''}`,
      problem: `${keys.map((k) => `resources.${k}`).join(' and ')} claim the same target ${spelled.length > 1 ? `path (${spelled.join(', ')})` : target}, and one target has one owner`,
      fix:
        target === RELEASE_TARGET
          ? 'keep one release resource per node: every release switches the one current link'
          : 'give each resource its own target (another path, another package or unit), or remove all but one of them',
    };
  });
  const nested = pathsUnderFiles(resources).map(({ file, under, path }) => ({
    field: `resources.${under}.path`,
    problem: `is inside "${path}", which resources.${file} declares a file, so one of them can never be there`,
    fix: `move resources.${under} out of "${path}", or give resources.${file} another path`,
  }));
  return [...shared, ...nested];
}

function dedupe(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const id = `${p.field}\u0000${p.problem}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}
