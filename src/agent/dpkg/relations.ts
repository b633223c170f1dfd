/*
 * Debian versions and relation fields, as dpkg reads them: enough to tell, before dpkg runs,
 * whether installing a package at a version would mean another package has to go (a Conflicts
 * or Breaks between them). Version comparison is dpkg's own algorithm (lib/dpkg/version.c
 * dpkg_version_compare and verrevcmp).
 */

const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';
const isAlpha = (c: string) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');

/** A character's weight in dpkg's ordering: "~" before the end of a part, letters before other characters. */
function order(c: string | undefined): number {
  if (c === undefined || isDigit(c)) return 0;
  if (c === '~') return -1;
  if (isAlpha(c)) return c.charCodeAt(0);
  return c.charCodeAt(0) + 256;
}

/** dpkg's verrevcmp: alternating runs of non-digits (by order) and digits (by value). */
function verrevcmp(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    let firstDiff = 0;
    while ((i < a.length && !isDigit(a[i])) || (j < b.length && !isDigit(b[j]))) {
      const ac = order(a[i]);
      const bc = order(b[j]);
      if (ac !== bc) return ac - bc;
      i++;
      j++;
    }
    while (a[i] === '0') i++;
    while (b[j] === '0') j++;
    while (isDigit(a[i]) && isDigit(b[j])) {
      if (firstDiff === 0) firstDiff = a.charCodeAt(i) - b.charCodeAt(j);
      i++;
      j++;
    }
    if (isDigit(a[i])) return 1;
    if (isDigit(b[j])) return -1;
    if (firstDiff !== 0) return firstDiff;
  }
  return 0;
}

function parts(version: string): { epoch: number; upstream: string; revision: string } {
  const colon = version.indexOf(':');
  const epoch = colon < 0 ? 0 : Number(version.slice(0, colon));
  const rest = colon < 0 ? version : version.slice(colon + 1);
  const dash = rest.lastIndexOf('-');
  return dash < 0
    ? { epoch, upstream: rest, revision: '' }
    : { epoch, upstream: rest.slice(0, dash), revision: rest.slice(dash + 1) };
}

/** <0, 0 or >0 as `a` is older than, the same as or newer than `b`. */
export function compareVersions(a: string, b: string): number {
  const x = parts(a);
  const y = parts(b);
  if (x.epoch !== y.epoch) return x.epoch - y.epoch;
  return verrevcmp(x.upstream, y.upstream) || verrevcmp(x.revision, y.revision);
}

/** One relation of a Conflicts, Breaks or Provides field: "name[:arch] [(op version)]". */
export interface Relation {
  name: string;
  op: '<<' | '<=' | '=' | '>=' | '>>' | null;
  version: string | null;
  /** As written, for messages. */
  text: string;
}

const RELATION = /^([a-z0-9][a-z0-9+.-]*)(?::[a-z0-9-]+)?\s*(?:\(\s*(<<|<=|=|>=|>>|<|>)\s*([^\s)]+)\s*\))?$/;

/** The relations of a field (alternatives, which Conflicts and Breaks may not have, count each); unreadable ones are left out. */
export function parseRelations(field: string): Relation[] {
  const out: Relation[] = [];
  for (const text of field.split(/[,|]/).map((t) => t.trim())) {
    const m = RELATION.exec(text.replace(/\s*\[[^\]]*\]/g, '').replace(/\s*<[^>]*>$/g, ''));
    if (!m) continue;
    // "<" and ">" are dpkg's obsolete spellings of "<=" and ">=".
    const op = m[2] === '<' ? '<=' : m[2] === '>' ? '>=' : ((m[2] ?? null) as Relation['op']);
    out.push({ name: m[1], op, version: m[3] ?? null, text });
  }
  return out;
}

/** Whether `version` satisfies the relation's version constraint (no constraint: any version does). */
export function satisfies(version: string, r: Pick<Relation, 'op' | 'version'>): boolean {
  if (r.op === null || r.version === null) return true;
  const c = compareVersions(version, r.version);
  return { '<<': c < 0, '<=': c <= 0, '=': c === 0, '>=': c >= 0, '>>': c > 0 }[r.op];
}

/** A package dpkg knows, with the relations that can stand in another package's way. */
export interface RelatedPackage {
  name: string;
  version: string;
  conflicts: Relation[];
  breaks: Relation[];
  provides: Relation[];
}

/** One package that installing another would push out, and why. */
export interface InTheWay {
  package: string;
  version: string;
  /** The relation, as its control file writes it, and whose it is. */
  because: string;
  /** What dpkg would do to the package about it. */
  consequence: string;
}

/** What a candidate for installation declares about other packages (a .deb's, or apt's index of it). */
export interface Candidate {
  name: string;
  version: string;
  conflicts?: Relation[];
  breaks?: Relation[];
  replaces?: Relation[];
  /** Virtual packages it provides: an installed package's Conflicts or Breaks on one of them counts too. */
  provides?: Relation[];
}

const CONSEQUENCE = {
  Conflicts: 'dpkg makes room only by removing it',
  Breaks: 'dpkg makes room only by removing or deconfiguring it',
  Replaces: 'dpkg hands its files over, and removes it once none are left',
} as const;

/**
 * What stands in the way of installing `candidate` among the `installed` packages: an installed
 * package whose Conflicts or Breaks names the candidate at that version, or one the candidate's
 * own Conflicts, Breaks (by name, or by what it Provides) or Replaces names. dpkg would refuse the
 * install, or remove, deconfigure or take over the other package: either way, only a destructive
 * change could make room.
 */
export function standingInTheWay(candidate: Candidate, installed: RelatedPackage[]): InTheWay[] {
  const out: InTheWay[] = [];
  for (const p of installed) {
    if (p.name === candidate.name) continue;
    const theirs = [...p.conflicts.map((r) => ['Conflicts', r] as const), ...p.breaks.map((r) => ['Breaks', r] as const)];
    for (const [field, r] of theirs) {
      const byName = r.name === candidate.name && satisfies(candidate.version, r);
      // A virtual package matches an unversioned relation, or a versioned one through a versioned Provides.
      const provided = (candidate.provides ?? []).some(
        (v) => v.name === r.name && (r.op === null || (v.op === '=' && v.version !== null && satisfies(v.version, r))),
      );
      if (byName || provided)
        out.push({
          package: p.name,
          version: p.version,
          because: `it declares ${field}: ${r.text}${byName ? '' : `, which ${candidate.name} ${candidate.version} provides`}`,
          consequence: CONSEQUENCE[field],
        });
    }
    const ours = [
      ...(candidate.conflicts ?? []).map((r) => ['Conflicts', r] as const),
      ...(candidate.breaks ?? []).map((r) => ['Breaks', r] as const),
      ...(candidate.replaces ?? []).map((r) => ['Replaces', r] as const),
    ];
    for (const [field, r] of ours) {
      const byName = r.name === p.name && satisfies(p.version, r);
      const byProvides = field !== 'Replaces' && r.op === null && p.provides.some((v) => v.name === r.name);
      if (byName || byProvides)
        out.push({
          package: p.name,
          version: p.version,
          because: `${candidate.name} ${candidate.version} declares ${field}: ${r.text}${byProvides ? `, which it provides` : ''}`,
          consequence: CONSEQUENCE[field],
        });
    }
  }
  return out;
}
