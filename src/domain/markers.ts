/*
 * Whether two change markers name the same state of a resource. Markers are spelled by the agent
 * (src/agent/markers.ts) and compared by the agent (compare-and-swap, its own writes, the watch)
 * and by the loop (an ineffective repair, a flip, a standing refusal): all compare through here.
 *
 * A regular file's marker grew from `file:<mtime>:<inode>:<size>` to
 * `file:<mtime>:<inode>:<size>:<ctime>:<digest>`. Loops that ran before carry the short spelling
 * in their history, fence.json keeps the agent's last write's marker in it, and the watch's
 * baseline may be either; the digest is also left out where reading the bytes would cost too
 * much (the watch). So a marker that lacks a part is compared on the parts it has: the upgrade
 * sees no false change, and from the next observation on every marker carries all of them.
 * Between two full markers this is string equality.
 */

/** The parts of a regular file's marker; null for any other marker. */
function fileParts(marker: string): { base: string; ctime: string | null; digest: string | null } | null {
  const parts = marker.split(':');
  if (parts[0] !== 'file' || parts.length < 4 || parts.length > 6) return null;
  return { base: parts.slice(0, 4).join(':'), ctime: parts[4] ?? null, digest: parts[5] ?? null };
}

/**
 * A unit's marker is `unit:<digest of the manager's view>|<Datum's own file's marker>`; the
 * watch's adds `|<running state>`, which observe leaves out (a crash is no writer's change) and
 * which only two watch readings compare.
 */
function unitParts(marker: string): { view: string; own: string; running: string | null } | null {
  if (!marker.startsWith('unit:')) return null;
  const [view = '', own, running] = marker.split('|');
  return own === undefined ? null : { view, own, running: running ?? null };
}

export function sameMarker(a: string | null | undefined, b: string | null | undefined): boolean {
  if (a === b) return true;
  if (typeof a !== 'string' || typeof b !== 'string') return false;
  const u = unitParts(a);
  const v = unitParts(b);
  if (u !== null || v !== null) {
    if (u === null || v === null || u.view !== v.view || !sameMarker(u.own, v.own)) return false;
    return u.running === null || v.running === null || u.running === v.running;
  }
  const x = fileParts(a);
  const y = fileParts(b);
  if (x === null || y === null || x.base !== y.base) return false;
  if (x.ctime !== null && y.ctime !== null && x.ctime !== y.ctime) return false;
  return x.digest === null || y.digest === null || x.digest === y.digest;
}
