import { existsSync } from 'node:fs';
import path from 'node:path';
import { UsageError, withFix } from './errors';

/** Where `datum agent` and `datum validate` look for agent.yaml when no --config or file is given (seed 001's path). */
export const DEFAULT_AGENT_CONFIG = '/etc/datum/agent.yaml';

/** The fleet directory: --fleet, or $DATUM_FLEET (commander binds it); it must hold desired/nodes/. */
export function fleetDirFrom(flag: string | undefined): string {
  const dir = flag ?? process.env.DATUM_FLEET;
  if (!dir) throw new UsageError(withFix('no fleet directory', 'pass --fleet DIR or set DATUM_FLEET'));
  const abs = path.resolve(dir);
  if (!existsSync(path.join(abs, 'desired', 'nodes'))) {
    throw new UsageError(
      withFix(
        `${abs} has no desired/nodes/`,
        'point --fleet at a fleet directory (desired/nodes/<node>.yaml, agents/, artifacts/)',
      ),
    );
  }
  return abs;
}

/** Datum's local state (the SQLite ledger, the dev server's database): --data, $DATUM_DATA, or ./.datum. */
export function dataDirFrom(flag: string | undefined): string {
  return path.resolve(flag ?? process.env.DATUM_DATA ?? '.datum');
}
