import { spawnSync } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { listFleetAgents } from '../agent/config';
import { projectRoot } from './paths';

/**
 * The bundled demo fleet (examples/fleet), copied once into DATA/fleet so the user can edit desired
 * state and agent.yaml there, with each node rooted under DATA/nodes. `by` names the command that
 * rooted it (`datum dev`, `npm run cluster`) in each agent.yaml's header. N-24 starts as the seed
 * tells it: the operator has approved maintenance and switched it on by hand. The nodes that reach
 * what a host already runs join where the host can show them: N-26 (a package, a directory with an
 * owner and mode) where dpkg is installed, N-27 (a systemd unit) where a user manager answers.
 */
export async function prepareDemoFleet(dataDir: string, by: string): Promise<string> {
  const fleetDir = path.join(dataDir, 'fleet');
  if (existsSync(path.join(fleetDir, 'desired', 'nodes'))) return fleetDir;
  const bundled = path.join(projectRoot(), 'examples', 'fleet');
  await fs.cp(bundled, fleetDir, { recursive: true, filter: (src) => src !== path.join(bundled, 'optional') });
  for (const [dir, usable] of Object.entries(OPTIONAL))
    if (usable()) await fs.cp(path.join(bundled, 'optional', dir), fleetDir, { recursive: true });
  for (const { file } of await listFleetAgents(fleetDir)) await rootAgent(file, dataDir, by);
  for (const f of ['desired/nodes/N-26.yaml', 'next/N-26.yaml']) await asThisUser(path.join(fleetDir, f));
  const flag = path.join(dataDir, 'nodes', 'N-24', 'flags', 'maintenance.json');
  await fs.mkdir(path.dirname(flag), { recursive: true });
  await fs.writeFile(flag, 'true\n');
  return fleetDir;
}

const answers = (command: string, args: string[]) => spawnSync(command, args, { stdio: 'ignore', timeout: 5000 }).status === 0;

/** The demo's optional nodes (examples/fleet/optional/<dir>), each where this host can show what it reaches. */
const OPTIONAL: Record<string, () => boolean> = {
  dpkg: () => answers('dpkg-query', ['--version']) && answers('dpkg', ['--version']),
  'systemd-user': () => answers('systemctl', ['--user', 'show', '--property=Version']),
};

interface DemoAgent {
  node: string;
  root: string;
  packages?: { root: string };
  units?: { manager: string; directory?: string };
}

/** An agent.yaml rooted under the data dir: its node root, dpkg's own database beside it, the user manager's unit directory. */
async function rootAgent(file: string, dataDir: string, by: string): Promise<void> {
  const doc = parseYaml(await fs.readFile(file, 'utf8')) as DemoAgent;
  doc.root = path.join(dataDir, 'nodes', doc.node);
  if (doc.packages && doc.packages.root !== '/') doc.packages.root = path.join(dataDir, 'nodes', `${doc.node}.dpkg`);
  if (doc.units?.manager === 'user')
    doc.units.directory = path.join(process.env.XDG_CONFIG_HOME ?? path.join(os.homedir(), '.config'), 'systemd', 'user');
  await fs.writeFile(file, `# Rooted by ${by} under its data dir (the bundled copy says /var/lib/datum).\n${stringify(doc)}`);
  await fs.mkdir(doc.root, { recursive: true });
}

/**
 * The demo's directory is owned by daemon where the stack runs as root; otherwise by the user who
 * runs it (only root may give a file away).
 */
async function asThisUser(desired: string): Promise<void> {
  if (!existsSync(desired) || process.getuid?.() === 0) return;
  const user = os.userInfo().username;
  const group = spawnSync('id', ['-gn'], { encoding: 'utf8' }).stdout.trim() || user;
  const text = await fs.readFile(desired, 'utf8');
  await fs.writeFile(desired, text.replace('owner: daemon, group: daemon', `owner: ${user}, group: ${group}`));
}
