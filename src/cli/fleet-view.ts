import { promises as fs } from 'node:fs';
import type { Client } from '@temporalio/client';
import { DesiredStateAuthority } from '../activities/authority';
import { mapLimit } from '../activities/map-limit';
import { missingLoopMessage, missingLoops, NO_RUNNING_LOOP, type MissingLoop } from '../worker/fleet-loops';
import { resolveTarget, type ConnectionFlags } from './connection';
import { devFleetFor } from './dev-record';
import { fleetDirFrom } from './dirs';
import { UsageError, withFix } from './errors';

/*
 * What `datum status` and `datum nodes` add to the running loops: the authority's nodes that have
 * none. Without a fleet directory (--fleet, DATUM_FLEET) the authority is unknown, and the
 * commands say that they checked the running loops only rather than call the fleet right.
 */

export { NO_RUNNING_LOOP } from '../worker/fleet-loops';

/** A node with desired state and no running loop, as the CLI prints it. */
export interface NodeWithoutLoop extends MissingLoop {
  /** The generation the authority declares, null when its file does not read as desired state. */
  desired_generation: number | null;
  /** When the last loop ended; for a node that never had one, when its desired-state file last changed. */
  since: string;
  message: string;
}

export interface FleetCheck {
  /** The fleet directory compared with, null when none was given. */
  fleet: string | null;
  /** How many nodes the authority declares, null when no fleet was given. */
  declared: number | null;
  without_loop: NodeWithoutLoop[];
}

/**
 * The fleet directory of --fleet or DATUM_FLEET (checked when given); without either, the fleet
 * of the `datum dev` running the server these flags reach (dev-record.ts); else null.
 */
export function optionalFleetDir(flag: string | undefined, connection: ConnectionFlags = {}): string | null {
  if (flag !== undefined || process.env.DATUM_FLEET) return fleetDirFrom(flag);
  const target = resolveTarget(connection);
  return devFleetFor(target.address, target.namespace);
}

/** NO_RUNNING_LOOP compares the loops with the authority: asking for it without a fleet directory is a usage error. */
export function fleetFor(types: string[], flag: string | undefined, connection: ConnectionFlags = {}): string | null {
  const dir = optionalFleetDir(flag, connection);
  if (dir === null && types.includes(NO_RUNNING_LOOP))
    throw new UsageError(
      withFix(`--condition ${NO_RUNNING_LOOP} compares the loops with the authority`, 'pass --fleet DIR or set DATUM_FLEET'),
    );
  return dir;
}

/** The authority's nodes against the running loops (`running`: the nodes that have one). */
export async function checkFleet(client: Client, fleetDir: string | null, running: ReadonlySet<string>): Promise<FleetCheck> {
  if (fleetDir === null) return { fleet: null, declared: null, without_loop: [] };
  const authority = new DesiredStateAuthority(fleetDir);
  const declared = await authority.nodes();
  const missing = await missingLoops(client, declared, running);
  const without_loop = await mapLimit(missing, 16, async (m): Promise<NodeWithoutLoop> => {
    const read = await authority.read(m.node);
    const desired_generation = read.ok ? read.intent.generation : null;
    const since = m.last_loop?.closed_at ?? (await changedAt(authority.fileFor(m.node)));
    return { ...m, desired_generation, since, message: missingLoopMessage(m, desired_generation) };
  });
  return { fleet: fleetDir, declared: declared.length, without_loop };
}

async function changedAt(file: string): Promise<string> {
  const stat = await fs.stat(file).catch(() => null);
  return (stat?.mtime ?? new Date()).toISOString();
}

/** The words a text table shows for how the node lost its loop. */
export function endWords(n: MissingLoop): string {
  return n.end === 'NEVER_STARTED' ? 'never rolled out' : n.end.toLowerCase().replace('_', ' ');
}

/** Said under a report that could not compare with the authority. */
export const UNCHECKED =
  'Nodes without a running loop were not checked: no fleet directory — fix: pass --fleet DIR or set DATUM_FLEET';

/** The condition type a node without a loop is listed under, for --condition filters. */
export const FLEET_CONDITION_TYPES = [NO_RUNNING_LOOP] as const;
