import path from 'node:path';
import { admindirOf } from './query';
import { runTool, toolEnv, type ToolRun } from './run';

/*
 * The two ways the agent installs an exact version, each into the database under `root` only:
 * dpkg --install of a .deb it verified, or apt-get install name=version from the host's apt
 * sources. dpkg logs into the root it changes (<root>/var/log/dpkg.log, the host's own log when
 * the root is "/"), never into the host's log for a confined root: /etc/dpkg/dpkg.cfg names the
 * host's log, and the command line outranks it. Conffiles the host changed are kept (confold)
 * without a prompt, and stdin is /dev/null, so nothing waits for a person.
 */

/** How long one dpkg or apt-get run may take: inside the apply's ten minutes. */
const INSTALL_TIMEOUT_MS = 8 * 60_000;

const dpkgOptions = (root: string) => [
  `--root=${root}`,
  `--log=${path.join(root, 'var/log/dpkg.log')}`,
  '--force-confdef',
  '--force-confold',
];

/** dpkg --install of the .deb at `file` into the database under `root`. */
export async function dpkgInstall(root: string, file: string): Promise<ToolRun> {
  return await runTool('dpkg', [...dpkgOptions(root), '--install', '--', file], { timeoutMs: INSTALL_TIMEOUT_MS });
}

/**
 * apt-get install name=version into the database under `root`, with the host's apt configuration
 * or the APT_CONFIG file agent.yaml names (which is read instead of /etc/apt/apt.conf.d, so none
 * of the host's hooks run). apt plans against the same status file dpkg-query reads, never removes
 * a package (--no-remove: a conflict ends the run instead), may downgrade (an exact version is
 * the desired state), and never changes a held package. `downloadOnly` fetches the .debs into
 * apt's cache and installs nothing: the slow part, done before the agent's fence is taken.
 */
export async function aptInstall(
  root: string,
  aptConfig: string | undefined,
  name: string,
  version: string,
  downloadOnly: boolean,
): Promise<ToolRun> {
  const options = [
    '-q',
    '-y',
    '--no-remove',
    '--allow-downgrades',
    ...(downloadOnly ? ['--download-only'] : []),
    '-o',
    `Dir::State::status=${path.join(admindirOf(root), 'status')}`,
    ...dpkgOptions(root).flatMap((o) => ['-o', `DPkg::Options::=${o}`]),
  ];
  const env = toolEnv({ DEBIAN_FRONTEND: 'noninteractive', ...(aptConfig ? { APT_CONFIG: aptConfig } : {}) });
  return await runTool('apt-get', [...options, 'install', '--', `${name}=${version}`], { env, timeoutMs: INSTALL_TIMEOUT_MS });
}
