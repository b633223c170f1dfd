import { promises as fs, type Stats } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseAgentConfigText } from '../../schemas/documents';
import type { Problem } from '../../domain';
import { readRegular } from './held';

/*
 * Node roots are disjoint, judged by where they really are (symlinks resolved, and by device and
 * inode, so a bind mount or a second spelling is the same directory): no root inside or
 * containing another, no agent.yaml inside any root (desired state could rewrite it), and no
 * system directory as a root. Checked every time an agent.yaml is read (on every observation),
 * against the other agent.yaml files this process serves and the sibling *.yaml files of its
 * directory (how /etc/datum/agents/ is laid out under systemd, one process per file).
 *
 * An agent serving 1000 nodes reads 1000 agent.yaml files every resync, so the comparison with
 * every other root (O(nodes)) is made once per change, not once per read (issue 33): a verdict
 * stands while where this file and its root really are (resolved path, device and inode of each
 * directory on the way, looked at on every read) and what the directory's siblings claim stay the
 * same. Another root this process serves cannot invalidate it: that root is judged against this
 * one, both ways, when it is read, and is refused, not this one, when they overlap.
 */

/** Directories that are never a node's root: desired state would write into the system itself. */
const SYSTEM_DIRS = [
  '/',
  '/bin',
  '/boot',
  '/dev',
  '/etc',
  '/home',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/media',
  '/mnt',
  '/opt',
  '/proc',
  '/root',
  '/run',
  '/sbin',
  '/snap',
  '/srv',
  '/sys',
  '/tmp',
  '/usr',
  '/usr/bin',
  '/usr/lib',
  '/usr/local',
  '/usr/sbin',
  '/usr/share',
  '/var',
  '/var/cache',
  '/var/lib',
  '/var/log',
  '/var/mail',
  '/var/run',
  '/var/spool',
  '/var/tmp',
];

interface Where {
  /** The path with every existing part's symlinks resolved. */
  resolved: string;
  /** device:inode of the path (when it exists) and of each existing directory above it. */
  ids: string[];
}

interface Claimed extends Where {
  file: string;
  root: string;
}

/** What this process last read from each agent.yaml it serves (by the file's resolved path). */
const served = new Map<string, Claimed>();

const idKey = (st: Stats) => `${st.dev}:${st.ino}`;

/** Where `p` really is: the deepest existing ancestor resolved, the rest appended; with the identities on the way. */
async function where(p: string): Promise<Where> {
  const abs = path.resolve(p);
  let existing = abs;
  const rest: string[] = [];
  for (;;) {
    try {
      existing = await fs.realpath(existing);
      break;
    } catch {
      if (existing === path.dirname(existing)) break;
      rest.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
  }
  const ids: string[] = [];
  for (let dir = existing; ; dir = path.dirname(dir)) {
    const st = await fs.stat(dir).catch(() => null);
    if (st) ids.push(idKey(st));
    if (dir === path.dirname(dir)) break;
  }
  // A path that does not exist yet has no identity of its own: its first id is its parent's.
  return { resolved: path.join(existing, ...rest), ids: rest.length === 0 ? ids : ['', ...ids] };
}

const inside = (outer: string, inner: string) => inner === outer || inner.startsWith(outer.endsWith('/') ? outer : `${outer}/`);

/** `outer` contains (or is) `inner`, by path or by identity (`inner` has outer's directory above it). */
function contains(outer: Where, inner: Where): boolean {
  if (inside(outer.resolved, inner.resolved)) return true;
  const own = outer.ids[0];
  return own !== '' && own !== undefined && inner.ids.includes(own);
}

let systemIds: Map<string, string> | null = null;

async function systemDir(root: Where): Promise<string | null> {
  const home = os.homedir();
  for (const dir of [...SYSTEM_DIRS, home]) if (root.resolved === dir) return dir;
  if (systemIds === null) {
    systemIds = new Map();
    for (const dir of [...SYSTEM_DIRS, home]) {
      const st = await fs.stat(dir).catch(() => null);
      if (st) systemIds.set(idKey(st), dir);
    }
  }
  return root.ids[0] ? (systemIds.get(root.ids[0]) ?? null) : null;
}

/** What root checks have cost this process: judgements made, and the other roots compared in them. */
const checks = { judged: 0, compared: 0 };

/** How many root judgements this process made and how many other roots they compared (a copy). */
export function rootCheckCounts(): { judged: number; compared: number } {
  return { ...checks };
}

/** Per agent.yaml (resolved as given): what its last disjoint verdict was made on. */
const verdicts = new Map<string, string>();

/**
 * The problems of `configPath`'s root (as `root`), with the fix for each; none when it is
 * disjoint from every other. Remembers it as this process's, for the next check of another.
 */
export async function rootProblems(configPath: string, root: string): Promise<Problem[]> {
  const file = await where(configPath);
  const mine: Claimed = { ...(await where(root)), file: file.resolved, root };
  const siblings = await siblingsOf(path.dirname(path.resolve(configPath)));
  const on = [file.resolved, ...file.ids, root, mine.resolved, ...mine.ids, siblings.version].join('\0');
  const given = path.resolve(configPath);
  if (verdicts.get(given) === on && served.has(mine.file)) return [];
  const problems = await judgeRoot(mine, file, siblings.claims);
  // Only a root found disjoint is this process's; one refused stays a sibling read from disk.
  if (problems.length === 0) {
    served.set(mine.file, mine);
    verdicts.set(given, on);
  } else {
    served.delete(mine.file);
    verdicts.delete(given);
  }
  return problems;
}

async function judgeRoot(mine: Claimed, file: Where, siblings: Claimed[]): Promise<Problem[]> {
  checks.judged++;
  const problems: Problem[] = [];
  const system = await systemDir(mine);
  if (system !== null)
    problems.push({
      field: 'root',
      problem: `${mine.root} is the system directory ${system}, and desired state would write into the system itself`,
      fix: 'give the node a directory of its own, such as /var/lib/datum/<node>',
    });
  if (contains(mine, file))
    problems.push({
      field: 'root',
      problem: `${mine.root} contains this agent.yaml (${file.resolved}), so desired state could rewrite the agent's own trust settings`,
      fix: 'keep agent.yaml outside every node root, such as in /etc/datum/agents/',
    });
  for (const other of othersOf(mine.file, siblings)) {
    checks.compared++;
    if (overlap(mine, other) === null) continue;
    // Before refusing over a file this process read earlier: what it says now (siblings are read fresh).
    const now = served.get(other.file) === other ? await readClaim(other.file) : other;
    if (now === null) served.delete(other.file);
    const problem = now === null ? null : overlap(mine, now);
    if (problem !== null) problems.push(problem);
  }
  return problems;
}

function overlap(mine: Claimed, other: Claimed): Problem | null {
  const fix = 'give every node a root of its own, side by side (such as /var/lib/datum/<node>), never one inside another';
  const them = `the root ${other.root} of ${other.file}`;
  if (contains(mine, other) && contains(other, mine)) return { field: 'root', problem: `${mine.root} is ${them}`, fix };
  if (contains(other, mine)) return { field: 'root', problem: `${mine.root} lies inside ${them}`, fix };
  if (contains(mine, other)) return { field: 'root', problem: `${mine.root} contains ${them}`, fix };
  const keep = 'keep every agent.yaml outside every node root';
  if (contains(mine, { resolved: other.file, ids: [''] }))
    return {
      field: 'root',
      problem: `${mine.root} contains ${other.file}, another agent's agent.yaml, which desired state could then rewrite`,
      fix: keep,
    };
  // Both ways, so that a verdict made before `other` was read still stands once it is.
  if (contains(other, { resolved: mine.file, ids: [''] }))
    return {
      field: 'root',
      problem: `this agent.yaml (${mine.file}) lies inside ${them}, whose desired state could then rewrite it`,
      fix: keep,
    };
  return null;
}

/** The other agent.yaml files this process serves, and the siblings of this one on disk. */
function othersOf(self: string, siblings: Claimed[]): Claimed[] {
  const others = new Map<string, Claimed>();
  for (const [file, claimed] of served) if (file !== self) others.set(file, claimed);
  for (const sibling of siblings) if (sibling.file !== self && !others.has(sibling.file)) others.set(sibling.file, sibling);
  return [...others.values()];
}

/** Per directory: its names as of its last ctime; per sibling file: its claim as of its last change. */
const dirCache = new Map<string, { key: string; names: string[] }>();
const siblingCache = new Map<string, { key: string; claimed: Claimed | null }>();

interface Siblings {
  claims: Claimed[];
  /** Changes whenever what the siblings claim changes: a verdict made on another version is judged again. */
  version: number;
}

/** Per directory: its siblings as last scanned, and when (a scan under way is shared). */
const scans = new Map<string, { at: number; siblings: Promise<Siblings> }>();
/** Per directory: what its siblings claimed at the last scan, and that version's number. */
const claimed = new Map<string, { said: string; version: number }>();

/**
 * The *.yaml files beside an agent.yaml, those this process serves among them (othersOf prefers
 * what it served), so that the version moves only when a file does. A directory is scanned at
 * most once per SCAN_MS, whichever of its nodes asks: an agent serving 1000 nodes from one
 * directory otherwise stats every sibling for every node, 1000 × 1000 per resync.
 */
function siblingsOf(dir: string): Promise<Siblings> {
  const scan = scans.get(dir);
  if (scan && Date.now() - scan.at < SCAN_MS) return scan.siblings;
  const siblings = scanSiblings(dir).then((claims) => {
    const said = JSON.stringify(claims.map((c) => [c.file, c.root, c.resolved, c.ids]));
    const last = claimed.get(dir);
    const now = last?.said === said ? last : { said, version: (last?.version ?? 0) + 1 };
    claimed.set(dir, now);
    return { claims, version: now.version };
  });
  scans.set(dir, { at: Date.now(), siblings });
  return siblings;
}

/** How long a directory's scan of its siblings stands: a sibling changed elsewhere is seen within it. */
const SCAN_MS = 5_000;

/**
 * Each sibling parsed once per change of it (stat-keyed); one that cannot be read is its own
 * agent's problem, not this one's.
 */
async function scanSiblings(dir: string): Promise<Claimed[]> {
  const dst = await fs.stat(dir).catch(() => null);
  if (!dst) return [];
  const dkey = `${dst.ino}:${dst.mtimeMs}:${dst.ctimeMs}`;
  let listed = dirCache.get(dir);
  if (listed?.key !== dkey) {
    const names = await fs.readdir(dir).catch(() => [] as string[]);
    listed = { key: dkey, names: names.filter((n) => n.endsWith('.yaml') || n.endsWith('.yml')) };
    dirCache.set(dir, listed);
  }
  const out: Claimed[] = [];
  for (const name of listed.names) {
    const at = path.join(dir, name);
    const st = await fs.stat(at).catch(() => null);
    if (!st?.isFile()) continue;
    const key = `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
    let cached = siblingCache.get(at);
    if (cached?.key !== key) {
      cached = { key, claimed: await readClaim(at) };
      siblingCache.set(at, cached);
    }
    if (cached.claimed) out.push(cached.claimed);
  }
  return out;
}

async function readClaim(file: string): Promise<Claimed | null> {
  try {
    const { bytes } = await readRegular(file, 64 * 1024, file, true);
    const config = parseAgentConfigText(bytes.toString('utf8'), file);
    return { ...(await where(config.root)), file: (await where(file)).resolved, root: config.root };
  } catch {
    return null;
  }
}
