import { withFix } from '../contract/fix';

/*
 * Node selectors (`--selector`, a wave plan's `selector:`): which nodes a command or a wave
 * takes, by name pattern or by the labels desired state gives a node (`labels:` in
 * desired/nodes/<node>.yaml). Terms are separated by commas and all must hold:
 *
 *   role=web        the label role is web (* and ? match any characters: zone=eu-*)
 *   role!=web       the label is absent or something else
 *   canary          the node has the label canary
 *   !canary         the node does not have it
 *   name=web-*      the node's name matches the pattern (`name` is not a label)
 *   *               every node
 */

export type Labels = Readonly<Record<string, string>>;

export type SelectorTerm =
  | { kind: 'all' }
  | { kind: 'name'; pattern: string }
  | { kind: 'equals'; key: string; pattern: string }
  | { kind: 'differs'; key: string; pattern: string }
  | { kind: 'has'; key: string }
  | { kind: 'lacks'; key: string };

export interface Selector {
  /** As written, for messages. */
  text: string;
  terms: SelectorTerm[];
}

/** A label key: letters and digits, with ".", "_", "-" or "/" inside (role, team.io/owner). */
export const LABEL_KEY = /^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$/;
/** A label value: up to 63 letters, digits, ".", "_" or "-". */
export const LABEL_VALUE = /^[A-Za-z0-9._-]{0,63}$/;
const PATTERN = /^[A-Za-z0-9._*?-]{1,128}$/;
const MAX_TERMS = 16;

const EXAMPLE = 'write terms like role=web,zone!=b or name=web-* (docs/operations.md, "Labels and selectors")';

/** The selector, or why the text is none. */
export function parseSelector(text: string): { ok: true; selector: Selector } | { ok: false; error: string } {
  const parts = text.split(',').map((t) => t.trim());
  if (text.trim() === '' || parts.some((p) => p === ''))
    return { ok: false, error: withFix(`selector ${JSON.stringify(text)} has an empty term`, EXAMPLE) };
  if (parts.length > MAX_TERMS)
    return { ok: false, error: withFix(`selector has ${parts.length} terms, more than ${MAX_TERMS}`, 'select with fewer terms') };
  const terms: SelectorTerm[] = [];
  for (const part of parts) {
    const term = termOf(part);
    if (typeof term === 'string') return { ok: false, error: withFix(`selector term ${JSON.stringify(part)} ${term}`, EXAMPLE) };
    terms.push(term);
  }
  return { ok: true, selector: { text: parts.join(','), terms } };
}

function termOf(part: string): SelectorTerm | string {
  if (part === '*') return { kind: 'all' };
  const m = /^(!?)([^=!]+?)(?:(!=|==|=)(.*))?$/.exec(part);
  if (!m) return 'is not key=value, key!=value, key or !key';
  const not = m[1] === '!';
  const key = m[2] ?? '';
  const op = m[3];
  const value = m[4] ?? '';
  if (key === 'name') {
    if (not || op !== '=' || !PATTERN.test(value)) return 'names nodes as name=<pattern>, such as name=web-*';
    return { kind: 'name', pattern: value };
  }
  if (!LABEL_KEY.test(key)) return `has a label key ${JSON.stringify(key)} that is not one (letters, digits, ".", "_", "-", "/")`;
  if (op === undefined) return not ? { kind: 'lacks', key } : { kind: 'has', key };
  if (not) return 'negates a comparison: write key!=value instead';
  if (!PATTERN.test(value)) return 'compares with a value that is not letters, digits, ".", "_", "-", "*" or "?"';
  return op === '!=' ? { kind: 'differs', key, pattern: value } : { kind: 'equals', key, pattern: value };
}

/** Whether `text` matches the glob `pattern` (* any run of characters, ? any one), whole. */
export function globMatches(pattern: string, text: string): boolean {
  const source = pattern
    .replace(/[.+^${}()|[\]\\-]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${source}$`).test(text);
}

export function selects(selector: Selector, node: string, labels: Labels): boolean {
  return selector.terms.every((t) => termHolds(t, node, labels));
}

function termHolds(t: SelectorTerm, node: string, labels: Labels): boolean {
  const has = (key: string) => Object.hasOwn(labels, key);
  switch (t.kind) {
    case 'all':
      return true;
    case 'name':
      return globMatches(t.pattern, node);
    case 'equals':
      return has(t.key) && globMatches(t.pattern, labels[t.key] ?? '');
    case 'differs':
      return !has(t.key) || !globMatches(t.pattern, labels[t.key] ?? '');
    case 'has':
      return has(t.key);
    case 'lacks':
      return !has(t.key);
  }
}

/** Whether the selector reads labels (then the authority must be read); one by name alone needs none. */
export const readsLabels = (selector: Selector): boolean => selector.terms.some((t) => t.kind !== 'all' && t.kind !== 'name');
