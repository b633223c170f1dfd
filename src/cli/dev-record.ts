import { existsSync, readFileSync } from 'node:fs';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { dataDirFrom } from './dirs';

/*
 * What a running `datum dev` tells the CLI beside it: the fleet directory its loops were rolled
 * out from, at <data>/dev.json. `datum status` and `datum nodes` find the dev server the way a
 * user points them at it (the default 127.0.0.1:7233, or TEMPORAL_ADDRESS as dev prints it) and
 * its ledger in the data dir (./.datum, or DATUM_DATA); the fleet is found in that same data dir,
 * so under `npm start` a plain `datum status` also lists the nodes that have no running loop.
 * Only for the server it names: a status against any other address ignores it.
 */

export const DEV_RECORD = 'dev.json';

export interface DevRecord {
  /** The dev server's frontend, as dev started it (127.0.0.1:PORT). */
  address: string;
  namespace: string;
  /** The fleet directory the stack runs (absolute). */
  fleet: string;
  /** The `datum dev` process: a record left by one that is gone is not used. */
  pid: number;
  started_at: string;
}

export async function writeDevRecord(dataDir: string, record: DevRecord): Promise<void> {
  await fs.writeFile(path.join(dataDir, DEV_RECORD), `${JSON.stringify(record, null, 2)}\n`);
}

export async function removeDevRecord(dataDir: string): Promise<void> {
  await fs.rm(path.join(dataDir, DEV_RECORD), { force: true });
}

/**
 * The fleet of the `datum dev` that runs the server at `address` (namespace `namespace`), from the
 * data dir (DATUM_DATA or ./.datum), or null: no record, its dev process is gone, it names
 * another server, or its fleet has no desired/nodes/ any more.
 */
export function devFleetFor(address: string, namespace: string): string | null {
  const file = path.join(dataDirFrom(undefined), DEV_RECORD);
  let record: Partial<DevRecord>;
  try {
    record = JSON.parse(readFileSync(file, 'utf8')) as Partial<DevRecord>;
  } catch {
    return null; // No dev stack recorded here (or a record cut short): the running loops alone.
  }
  if (typeof record.fleet !== 'string' || typeof record.address !== 'string' || typeof record.pid !== 'number') return null;
  if (!alive(record.pid) || record.namespace !== namespace || !sameServer(record.address, address)) return null;
  return existsSync(path.join(record.fleet, 'desired', 'nodes')) ? record.fleet : null;
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: alive, someone else's; ESRCH: gone.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** localhost and 127.0.0.1 are the same dev server: the client's default and what dev listens on. */
function sameServer(a: string, b: string): boolean {
  const norm = (s: string) =>
    s
      .trim()
      .toLowerCase()
      .replace(/^localhost:/, '127.0.0.1:');
  return norm(a) === norm(b);
}
