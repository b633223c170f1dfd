/*
 * Size and depth of a value from outside, measured without recursion. Everything else that walks
 * a value (zod, canonicalJson, JSON.stringify, the SDK's converter) recurses, so a value nested a
 * few thousand levels deep overflows the stack there; this walk uses an explicit stack and stops
 * at the first cap it passes, so it costs at most the cap, whatever it is given.
 */

export interface JsonCaps {
  /** The deepest nesting of arrays and objects (the top-level value is depth 0). */
  depth: number;
  /** The characters of the value's JSON form (strings and keys by their length). */
  chars: number;
  /** The values in it, counting each visit of a shared value (what an alias expands to). */
  values: number;
}

/** Which cap a value passed, where (a dotted path), and how far it got. */
export type JsonBreach =
  | { cap: 'depth'; field: string; limit: number }
  | { cap: 'chars'; field: string; limit: number }
  | { cap: 'values'; field: string; limit: number }
  | { cap: 'type'; field: string; what: string };

/** One value on the walk's stack; `parent` and `key` give its path without building strings. */
export interface Frame {
  value: unknown;
  depth: number;
  parent: Frame | null;
  key: string | number | null;
}

/** The dotted path of a frame (built only for the one frame that breached). */
export function pathOf(frame: Frame, root = '(payload)'): string {
  const keys: Array<string | number> = [];
  for (let f: Frame | null = frame; f && f.key !== null; f = f.parent) keys.push(f.key);
  keys.reverse();
  let out = '';
  for (const k of keys) {
    if (typeof k === 'number') out = `${out}[${k}]`;
    // A key that is not a plain name is quoted (and clipped): a person must see where it is.
    else if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(k)) out = `${out}[${JSON.stringify(clip(k, 40))}]`;
    else out = out ? `${out}.${k}` : k;
  }
  // A path as deep as the value it names would be an unbounded echo of it: clipped.
  return clip(out, MAX_PATH_CHARS) || root;
}

/** The characters of a field path in a message. */
const MAX_PATH_CHARS = 120;

/** What a non-JSON value is, for the message ("a Date", "the number Infinity"). */
function nonJson(value: unknown): string | null {
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'undefined': // absent, as JSON.stringify and the wire treat it
      return null;
    case 'number':
      return Number.isFinite(value) ? null : `the number ${value}`;
    case 'object': {
      if (value === null || Array.isArray(value)) return null;
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto === Object.prototype || proto === null) return null;
      const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
      return `a ${typeof name === 'string' && name ? name : 'non-plain object'}`;
    }
    default:
      return `a value of type ${typeof value}`;
  }
}

/** Characters a scalar adds to the JSON form (an approximation that never undercounts by much). */
const scalarChars = (value: unknown): number =>
  typeof value === 'string' ? value.length + 2 : typeof value === 'number' ? String(value).length : value === undefined ? 0 : 5;

/**
 * The first cap `value` passes, or null when it is a JSON value within all of them. Iterative:
 * safe on any input, and it stops as soon as a cap is passed.
 */
export function jsonBreach(value: unknown, caps: JsonCaps): JsonBreach | null {
  const stack: Frame[] = [{ value, depth: 0, parent: null, key: null }];
  let chars = 0;
  let values = 0;
  for (let frame = stack.pop(); frame; frame = stack.pop()) {
    const v = frame.value;
    // undefined is an absent property (as JSON.stringify and the wire treat it), never an element.
    const what = v === undefined && typeof frame.key === 'number' ? 'undefined' : nonJson(v);
    if (what) return { cap: 'type', field: pathOf(frame), what };
    if (++values > caps.values) return { cap: 'values', field: pathOf(frame), limit: caps.values };
    if (v === null || typeof v !== 'object') {
      chars += scalarChars(v);
    } else {
      if (frame.depth + 1 > caps.depth) return { cap: 'depth', field: pathOf(frame), limit: caps.depth };
      chars += 2;
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], depth: frame.depth + 1, parent: frame, key: i });
        chars += v.length;
      } else {
        for (const k of Object.keys(v).reverse()) {
          chars += k.length + 4;
          stack.push({ value: (v as Record<string, unknown>)[k], depth: frame.depth + 1, parent: frame, key: k });
        }
      }
    }
    if (chars > caps.chars) return { cap: 'chars', field: pathOf(frame), limit: caps.chars };
  }
  return null;
}

/** A breach in words: "<field> is nested deeper than 8 levels". */
export function breachProblem(b: JsonBreach): string {
  switch (b.cap) {
    case 'depth':
      return `is nested deeper than ${b.limit} levels`;
    case 'chars':
      return `makes the value larger than ${b.limit} characters`;
    case 'values':
      return `makes the value hold more than ${b.limit} values`;
    case 'type':
      return `is ${b.what}, which is not a JSON value`;
  }
}

/** At most `max` characters of `text`, cut with "…" and the length it had. */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters)`;
}

/**
 * A value from outside as it may appear in a message: its JSON, clipped to `max` characters,
 * when it is small and shallow enough to serialise safely; otherwise what is wrong with it.
 * Never recurses on the value itself, so a workflow may echo any input it was given (a JSON
 * .stringify of an array nested 20,000 deep overflows the stack).
 */
export function echo(value: unknown, max = 200): string {
  if (value === undefined) return 'nothing';
  // Depth is what overflows; size only costs time, so it may be large before it is clipped.
  const breach = jsonBreach(value, { depth: 8, chars: 1_000_000, values: 100_000 });
  if (breach) return `(a value whose ${breach.field} ${breachProblem(breach)})`;
  return clip(JSON.stringify(value), max);
}
