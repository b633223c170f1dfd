import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { listFleetAgents } from '../agent/config';
import { projectRoot } from './paths';

/**
 * The bundled demo fleet (examples/fleet), copied once into DATA/fleet so the user can edit desired
 * state and agent.yaml there, with each node rooted under DATA/nodes. `by` names the command that
 * rooted it (`datum dev`, `npm run cluster`) in each agent.yaml's header. N-24 starts as the seed
 * tells it: the operator has approved maintenance and switched it on by hand.
 */
export async function prepareDemoFleet(dataDir: string, by: string): Promise<string> {
  const fleetDir = path.join(dataDir, 'fleet');
  if (existsSync(path.join(fleetDir, 'desired', 'nodes'))) return fleetDir;
  await fs.cp(path.join(projectRoot(), 'examples', 'fleet'), fleetDir, { recursive: true });
  for (const { file } of await listFleetAgents(fleetDir)) {
    const doc = parseYaml(await fs.readFile(file, 'utf8')) as { node: string; root: string };
    doc.root = path.join(dataDir, 'nodes', doc.node);
    await fs.writeFile(file, `# Rooted by ${by} under its data dir (the bundled copy says /var/lib/datum).\n${stringify(doc)}`);
    await fs.mkdir(doc.root, { recursive: true });
  }
  const flag = path.join(dataDir, 'nodes', 'N-24', 'flags', 'maintenance.json');
  await fs.mkdir(path.dirname(flag), { recursive: true });
  await fs.writeFile(flag, 'true\n');
  return fleetDir;
}
