// Structure-aware generators for the fuzz tier: valid documents first, then the ways a hostile
// or careless author breaks them. Each mutation says whether the result must be rejected and,
// when it must, which field the error has to name.
import fc from 'fast-check';
import { stringify } from 'yaml';

/** fast-check's runs per surface per run, CI's included (must-show 2: at least 10^4; docs/security.md says so). */
export const FUZZ_RUNS = 10_000;
/** FUZZ_RUNS, or DATUM_FUZZ_RUNS. */
export const RUNS = Number(process.env.DATUM_FUZZ_RUNS ?? FUZZ_RUNS);

/**
 * Generated node roots the filesystem adversary runs per run, CI's included. Each is a whole root
 * raced by another process, about 0.13 s of two cores: 10^4 would add some 22 minutes to every CI
 * run, so 10^4 is `npm run fuzz:fs-full` (docs/security.md); DATUM_FS_ADVERSARY_CASES sets any count.
 */
export const FS_ADVERSARY_CASES = 1000;

export interface Case {
  /** What the mutation did, for the counterexample. */
  what: string;
  text: string;
  /** The result must be the typed invalid outcome. */
  mustReject: boolean;
  /** A field (prefix) the error must name when it rejects; null when any field will do. */
  field: string | null;
}

const hex64 = fc.stringMatching(/^[a-f0-9]{64}$/);
const key = fc.stringMatching(/^[a-z][a-z0-9_-]{0,10}$/);
const relPath = fc
  .array(fc.stringMatching(/^[a-z][a-z0-9_.-]{0,8}$/), { minLength: 1, maxLength: 4 })
  .filter((s) => !['releases', 'current', 'flags', '.datum'].includes(s[0]) && s.every((x) => x !== '.' && x !== '..'))
  .map((s) => s.join('/'));
const duration = fc.constantFrom('1s', '30s', '5m', '1h', '250ms', '2m30s');
/** A Debian package name and version (policy 5.6.1 and 5.6.12), as a package resource names them. */
const packageName = fc.stringMatching(/^[a-z0-9][a-z0-9+.-]{1,20}$/);
const debianVersion = fc
  .tuple(
    fc.option(fc.integer({ min: 1, max: 99 }), { nil: undefined }),
    fc.stringMatching(/^[0-9][A-Za-z0-9.+~]{0,8}$/),
    fc.option(fc.stringMatching(/^[A-Za-z0-9.+~]{1,6}$/), { nil: undefined }),
  )
  .map(
    ([epoch, upstream, revision]) =>
      `${epoch === undefined ? '' : `${epoch}:`}${upstream}${revision === undefined ? '' : `-${revision}`}`,
  );

/** Mode, owner and group a file may declare, each maybe absent; a directory may also be setgid or sticky. */
const account = fc.constantFrom<string | number>('root', 'daemon', 'www-data', '_apt', 0, 1000, '65534');
const attributes = (modes: string[]) =>
  fc.record({ mode: fc.constantFrom(...modes), owner: account, group: account }, { requiredKeys: [] });
const FILE_MODES = ['0644', '0600', '640', '0755', '0400'];
const DIRECTORY_MODES = ['0755', '750', '2775', '1777', '3770', '0700'];

/** Whether `p` can join `taken` paths: not one of them, not inside a file of them, and no file `p` with one inside it. */
function fits(p: string, isFile: boolean, taken: Map<string, boolean>): boolean {
  for (const [q, qIsFile] of taken) {
    if (q === p || (qIsFile && p.startsWith(`${q}/`)) || (isFile && q.startsWith(`${p}/`))) return false;
  }
  return true;
}

/**
 * A desired-state document that validates: one release, files (some with mode, owner and group),
 * directories, flags, maybe a service and a package. The directory "data" is always there, so its mode is a field
 * the fuzzer types; no path is another's, or inside a declared file.
 */
export const validDesired = fc
  .record({
    node: fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,20}$/),
    generation: fc.integer({ min: 1, max: 1_000_000 }),
    version: fc.stringMatching(/^[0-9]{1,2}\.[0-9]{1,2}$/),
    sha256: hex64,
    files: fc.uniqueArray(fc.tuple(key, relPath, fc.jsonValue({ maxDepth: 3 }), attributes(FILE_MODES)), {
      selector: ([k, p]) => `${k}|${p}`,
      maxLength: 3,
    }),
    dirs: fc.uniqueArray(fc.tuple(key, relPath, attributes(DIRECTORY_MODES)), { selector: ([k]) => k, maxLength: 2 }),
    data: attributes(DIRECTORY_MODES).map((a) => ({ ...a, mode: a.mode ?? '0750' })),
    flags: fc.array(fc.tuple(key, fc.oneof(fc.boolean(), fc.integer(), fc.string({ maxLength: 8 }))), { maxLength: 2 }),
    policy: fc.record({ resync_interval: duration, observation_ttl: duration }, { requiredKeys: [] }),
    service: fc.boolean(),
    package: fc.option(fc.tuple(packageName, debianVersion, fc.option(hex64, { nil: undefined })), { nil: undefined }),
  })
  .map((d) => {
    const resources: Record<string, unknown> = {
      build: { type: 'release', version: d.version, artifact: `artifacts/app-${d.version}.tgz`, sha256: d.sha256 },
      // Upper case: relPath never spells it, so no generated file is at it or above it.
      data: { type: 'directory', path: 'Srv/data', ...d.data },
    };
    const taken = new Map<string, boolean>([['Srv/data', false]]);
    for (const [k, p, content, attrs] of d.files) {
      if (resources[`f${k}`] || !fits(p, true, taken)) continue;
      taken.set(p, true);
      resources[`f${k}`] = { type: 'file', path: p, content: typeof content === 'string' ? content : { v: content }, ...attrs };
    }
    for (const [k, p, attrs] of d.dirs) {
      if (resources[`d${k}`] || !fits(p, false, taken)) continue;
      taken.set(p, false);
      resources[`d${k}`] = { type: 'directory', path: p, ...attrs };
    }
    for (const [k, v] of d.flags) if (!resources[`g${k}`]) resources[`g${k}`] = { type: 'flag', value: v };
    const firstFile = Object.keys(resources).find((k) => k.startsWith('f'));
    if (d.service && firstFile)
      resources.app = { type: 'service', release: 'build', config: firstFile, command: ['node', 'server.js'] };
    if (d.package) {
      const [name, version, sha256] = d.package;
      resources.pkg = { type: 'package', name, version, ...(sha256 ? { artifact: `artifacts/${name}.deb`, sha256 } : {}) };
    }
    return { node: d.node, generation: d.generation, resources, policy: d.policy };
  });

/** A valid agent.yaml document. */
export const validAgent = fc
  .record({
    node: fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,20}$/),
    root: relPath.map((p) => `/var/lib/datum/${p}`),
    mode: fc.constantFrom('observe', 'enforce'),
    observe: fc.uniqueArray(key, { maxLength: 2 }),
    overrides: fc.uniqueArray(key, { maxLength: 2 }),
  })
  .map((a) => ({
    node: a.node,
    root: a.root,
    reconciliation: { mode: a.mode, resources: Object.fromEntries(a.observe.map((k) => [k, 'observe'])) },
    overrides: Object.fromEntries(
      a.overrides.map((k) => [k, { approved_by: 'oncall', reason: 'CHG-1', since: '2026-11-28T10:00:00Z' }]),
    ),
  }));

type Doc = Record<string, unknown>;

/** Values of every type a field might wrongly get. */
const wrongValue = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.string({ maxLength: 12 }),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(key, fc.integer(), { maxKeys: 2 }),
);

/** Every path to an object in `doc` (the root included), for mutations that add a field. */
function objectPaths(doc: unknown, at: string[] = []): string[][] {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return [];
  return [at, ...Object.entries(doc as Doc).flatMap(([k, v]) => objectPaths(v, [...at, k]))];
}

/** Every path to a value in `doc`. */
function leafPaths(doc: unknown, at: string[] = []): string[][] {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return at.length ? [at] : [];
  return Object.entries(doc as Doc).flatMap(([k, v]) => [[...at, k], ...leafPaths(v, [...at, k])]);
}

const kindOf = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function getAt(doc: Doc, path: string[]): unknown {
  let o: unknown = doc;
  for (const k of path) o = (o as Doc | undefined)?.[k];
  return o;
}

function setAt(doc: Doc, path: string[], value: unknown): Doc {
  const copy = structuredClone(doc);
  let o: Doc = copy;
  for (const k of path.slice(0, -1)) o = o[k] as Doc;
  o[path[path.length - 1]] = value;
  return copy;
}

/** A value nested `depth` levels deep, built without recursion. */
export function deep(depth: number, kind: 'array' | 'object'): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = kind === 'array' ? [v] : { a: v };
  return v;
}

/** A billion-laughs text: `levels` anchors, each aliasing the one before `width` times. */
export function aliasBomb(levels: number, width: number): string {
  const lines = [`  l0: &l0 [${Array(width).fill('"lol"').join(', ')}]`];
  for (let i = 1; i < levels; i++)
    lines.push(
      `  l${i}: &l${i} [${Array(width)
        .fill(`*l${i - 1}`)
        .join(', ')}]`,
    );
  return lines.join('\n');
}

/**
 * YAML text of a document: block YAML one time in three, JSON (which is YAML) otherwise, since
 * the yaml package's stringify costs more than the parse under test.
 */
const yamlText = (doc: unknown) => stringify(doc, { aliasDuplicateObjects: false });
let dumps = 0;
/** A document as its author would write it: YAML one time in three, else JSON (which is YAML too). */
export const dump = (doc: unknown) => (dumps++ % 3 === 0 ? yamlText(doc) : `${JSON.stringify(doc, null, 1)}\n`);

/**
 * The mutations of a valid document, by kind. `fields` are the document's own fields whose
 * wrong type must be rejected (every field there has a type: a wrong one can never pass).
 */
export function mutations(
  valid: fc.Arbitrary<Doc>,
  typedFields: string[][],
  extra: fc.Arbitrary<Case>[] = [],
): fc.Arbitrary<Case> {
  const asIs = valid.map((d): Case => ({ what: 'valid', text: dump(d), mustReject: false, field: null }));
  const wrongType = fc.tuple(valid, fc.constantFrom(...typedFields), wrongValue).map(([d, path, v]): Case => {
    const text = dump(setAt(d, path, v));
    // A value of another JSON type than the field's must be refused, and the error must name it.
    const other = kindOf(getAt(d, path)) !== kindOf(v);
    return {
      what: `wrong type at ${path.join('.')}: ${JSON.stringify(v)}`,
      text,
      mustReject: other,
      field: other ? path.join('.') : null,
    };
  });
  const unknownField = valid.chain((d) =>
    fc.tuple(fc.constantFrom(...objectPaths(d).filter((p) => !isFreeForm(p))), key).map(([path, k]): Case => {
      const name = `zz_${k}`;
      const text = dump(setAt(d, [...path, name], 1));
      return { what: `unknown field ${[...path, name].join('.')}`, text, mustReject: true, field: null };
    }),
  );
  const anyLeaf = valid.chain((d) =>
    fc.tuple(fc.constantFrom(...leafPaths(d)), fc.jsonValue({ maxDepth: 2 })).map(([path, v]): Case => ({
      what: `any value at ${path.join('.')}`,
      text: dump(setAt(d, path, v)),
      mustReject: false,
      field: null,
    })),
  );
  const deepValue = fc
    .tuple(
      valid,
      fc.constantFrom(...typedFields),
      fc.oneof(
        { weight: 9, arbitrary: fc.integer({ min: 33, max: 120 }) },
        { weight: 1, arbitrary: fc.integer({ min: 1000, max: 5000 }) },
      ),
      fc.constantFrom('array', 'object'),
    )
    .map(([d, path, depth, kind]): Case => ({
      what: `${kind} nested ${depth} deep at ${path.join('.')}`,
      text: `${yamlText(d)}zz_deep: ${kind === 'array' ? '['.repeat(depth) + ']'.repeat(depth) : '{a: '.repeat(depth) + '1' + '}'.repeat(depth)}\n`,
      mustReject: true,
      field: null,
    }));
  const bomb = fc
    .tuple(valid, fc.integer({ min: 4, max: 10 }), fc.integer({ min: 6, max: 12 }))
    .map(([d, levels, width]): Case => ({
      what: `alias bomb ${levels}×${width}`,
      text: `${yamlText(d)}zz_lol:\n${aliasBomb(levels, width)}\n`,
      mustReject: true,
      field: null,
    }));
  const duplicateKey = valid.map((d): Case => {
    const text = yamlText(d);
    const first = text.split('\n')[0];
    return { what: `duplicate key ${first}`, text: `${text}${first}\n`, mustReject: true, field: null };
  });
  const huge = valid.map((d): Case => ({
    what: 'a file over the byte cap',
    text: `${yamlText(d)}# ${'x'.repeat(300_000)}\n`,
    mustReject: true,
    field: '(file)',
  }));
  // A scalar YAML reads as something JSON has no form for, placed where any value is allowed
  // (inside the document's first free-form value when it has one, else a field of its own).
  const nonJson = fc
    .tuple(
      valid,
      fc.constantFrom('.inf', '-.inf', '.nan', '1e400', '!!binary aGVsbG8=', '!custom x', '2001-01-01T00:00:00Z'),
      fc.boolean(),
    )
    .map(([d, v, yaml11]): Case => {
      const text = yamlText(d).replace(/^(\s*)(content|value): .*$/m, `$1$2: {v: ${v}}`);
      const placed = text.includes(`{v: ${v}}`) ? text : `${text}zz_x: ${v}\n`;
      // YAML 1.1 reads timestamps as Dates and !!binary as bytes: a Date became {} in content.
      return {
        what: `non-JSON scalar ${v}${yaml11 ? ' (YAML 1.1)' : ''}`,
        text: yaml11 ? `%YAML 1.1\n---\n${placed}` : placed,
        // In YAML 1.2 a timestamp is a plain string, which is fine.
        mustReject: yaml11 || !v.startsWith('2001'),
        field: null,
      };
    });
  const garbage = fc
    .string({
      unit: fc.constantFrom(
        '{',
        '}',
        '[',
        ']',
        ':',
        '-',
        ' ',
        '\n',
        '&a',
        '*a',
        '!',
        '"',
        "'",
        '#',
        'x',
        '\t',
        '|',
        '>',
        '?',
        '%',
        '\u0000',
      ),
      maxLength: 80,
    })
    .map((text): Case => ({ what: 'syntax soup', text, mustReject: false, field: null }));
  return fc.oneof(
    { weight: 30, arbitrary: asIs },
    { weight: 40, arbitrary: wrongType },
    { weight: 30, arbitrary: unknownField },
    { weight: 30, arbitrary: anyLeaf },
    { weight: 10, arbitrary: deepValue },
    // A bomb costs the walk up to MAX_DOCUMENT_VALUES steps (~60 ms) before it is refused: fewer of them.
    { weight: 2, arbitrary: bomb },
    { weight: 10, arbitrary: duplicateKey },
    { weight: 10, arbitrary: nonJson },
    { weight: 30, arbitrary: garbage },
    // A 300 KB text costs more to build than to refuse: rare.
    { weight: 1, arbitrary: huge },
    ...extra.map((arbitrary) => ({ weight: 30, arbitrary })),
  );
}

/** Values whose contents are the author's own (file content, a flag's value, a policy's map): any key goes. */
function isFreeForm(path: string[]): boolean {
  return path.includes('content') || (path.length >= 3 && path[0] === 'resources' && path[2] === 'value');
}

export const HOSTILE_PATHS = [
  '/etc/passwd',
  '../escaped',
  'a/../../b',
  'etc/../..',
  '.datum/fence.json',
  '.datum/journal/x.json',
  'releases/7.4/server.js',
  'current/server.js',
  'flags/maintenance',
  'a//b',
  './a',
  'a/./b',
  'C:/windows',
  'a\u0000b',
  '',
];

/** Desired state whose file resource writes somewhere it must not: refused, naming that path field. */
export const escapingPath = fc.tuple(validDesired, fc.constantFrom(...HOSTILE_PATHS)).map(([d, p]): Case => {
  const doc = structuredClone(d) as Doc & { resources: Record<string, Record<string, unknown>> };
  doc.resources.fz = { type: 'file', path: p, content: 'x' };
  return { what: `file path ${JSON.stringify(p)}`, text: dump(doc), mustReject: true, field: 'resources.fz.path' };
});

/** Desired state whose directory resource is somewhere it must not be: refused, naming that path field. */
export const escapingDirectory = fc.tuple(validDesired, fc.constantFrom(...HOSTILE_PATHS)).map(([d, p]): Case => {
  const doc = structuredClone(d) as Doc & { resources: Record<string, Record<string, unknown>> };
  doc.resources.dz = { type: 'directory', path: p };
  return { what: `directory path ${JSON.stringify(p)}`, text: dump(doc), mustReject: true, field: 'resources.dz.path' };
});

/** Modes and owners no file may declare: setuid, setgid or sticky bits, non-octal text, a spelling getent would read as an option. */
export const HOSTILE_ATTRIBUTES: Array<[field: 'mode' | 'owner' | 'group', value: unknown]> = [
  ['mode', '4755'],
  ['mode', '2755'],
  ['mode', '6777'],
  ['mode', '1644'],
  ['mode', '0o755'],
  ['mode', 'rwxr-xr-x'],
  ['mode', '07555'],
  ['mode', 493],
  ['mode', ''],
  ['owner', '-rf'],
  ['owner', '--help'],
  ['owner', '1root'],
  ['group', 'a b'],
  ['group', -1],
  ['owner', '4294967295'],
  ['group', 'x'.repeat(40)],
];

/** Desired state with a file declaring one of those: refused, naming that field. */
export const hostileAttributes = fc.tuple(validDesired, fc.constantFrom(...HOSTILE_ATTRIBUTES)).map(([d, [field, v]]): Case => {
  const doc = structuredClone(d) as Doc & { resources: Record<string, Record<string, unknown>> };
  doc.resources.fz = { type: 'file', path: 'Etc/tool', content: '#!/bin/sh\n', [field]: v };
  return { what: `file ${field} ${JSON.stringify(v)}`, text: dump(doc), mustReject: true, field: `resources.fz.${field}` };
});

/** agent.yaml with a root that is not an absolute directory. */
export const relativeRoot = fc
  .tuple(validAgent, fc.constantFrom('var/lib/datum', '', '.', '../root', 'C:relative'))
  .map(([a, root]): Case => ({
    what: `root ${JSON.stringify(root)}`,
    text: dump({ ...a, root }),
    mustReject: true,
    field: 'root',
  }));
