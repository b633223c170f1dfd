import path from 'node:path';
import { admindirOf } from './query';
import { parseRelations, type Candidate } from './relations';
import { lastLines, runTool, toolEnv, type ToolRun } from './run';

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

/** Maintainer scripts that ask debconf take its defaults: nobody is there to answer. */
const NONINTERACTIVE = { DEBIAN_FRONTEND: 'noninteractive' };

/** dpkg --install of the .deb at `file` into the database under `root`. */
export async function dpkgInstall(root: string, file: string): Promise<ToolRun> {
  return await runTool('dpkg', [...dpkgOptions(root), '--install', '--', file], {
    env: toolEnv(NONINTERACTIVE),
    timeoutMs: INSTALL_TIMEOUT_MS,
  });
}

const aptEnv = (aptConfig: string | undefined) => toolEnv({ ...NONINTERACTIVE, ...(aptConfig ? { APT_CONFIG: aptConfig } : {}) });

/** apt reads the same status file dpkg-query does: the database under `root`. */
const aptStatus = (root: string) => ['-o', `Dir::State::status=${path.join(admindirOf(root), 'status')}`];

/**
 * What the host's apt sources say of name=version (apt-cache show, from the package lists as the
 * host last updated them): its relations to other packages, checked before anything is fetched;
 * a problem when apt knows no such version.
 */
export async function aptCandidate(
  root: string,
  aptConfig: string | undefined,
  name: string,
  version: string,
): Promise<{ candidate: Candidate } | { problem: string }> {
  const run = await runTool('apt-cache', [...aptStatus(root), 'show', '--', `${name}=${version}`], {
    env: aptEnv(aptConfig),
    timeoutMs: 60_000,
  });
  if (run.code !== 0)
    return { problem: `apt-cache exited ${run.code ?? run.signal}: ${lastLines(run.output, 2) || 'no message'}` };
  // The first stanza (the same version from two sources is one package); folded lines continue a field.
  const stanza = run.stdout.split(/\n\n/)[0] ?? '';
  const fields = new Map<string, string>();
  let last = '';
  for (const line of stanza.split('\n')) {
    if (/^\s/.test(line) && last) fields.set(last, `${fields.get(last)} ${line.trim()}`);
    else if (line.includes(':'))
      fields.set((last = line.slice(0, line.indexOf(':')).toLowerCase()), line.slice(line.indexOf(':') + 1).trim());
  }
  if (fields.get('package') !== name || fields.get('version') !== version)
    return { problem: `apt has no ${name} ${version} in the host's package lists` };
  return {
    candidate: {
      name,
      version,
      conflicts: parseRelations(fields.get('conflicts') ?? ''),
      breaks: parseRelations(fields.get('breaks') ?? ''),
      replaces: parseRelations(fields.get('replaces') ?? ''),
      provides: parseRelations(fields.get('provides') ?? ''),
    },
  };
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
    ...aptStatus(root),
    ...dpkgOptions(root).flatMap((o) => ['-o', `DPkg::Options::=${o}`]),
  ];
  return await runTool('apt-get', [...options, 'install', '--', `${name}=${version}`], {
    env: aptEnv(aptConfig),
    timeoutMs: INSTALL_TIMEOUT_MS,
  });
}
