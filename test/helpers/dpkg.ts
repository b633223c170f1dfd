// The real dpkg, on a confined root (`dpkg --root DIR`): a system that has some of this host's
// packages, copied in with their files and their entries in dpkg's database, and nothing else, so
// a test can install a .deb as a host with exactly those packages would, and run what it installed
// there under chroot.
import { spawnSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';

/** Why this host cannot run dpkg on a confined root, or undefined when it can. */
export function dpkgUnavailable(): string | undefined {
  if (spawnSync('dpkg', ['--version']).status !== 0) return 'dpkg is not installed (a Debian or Ubuntu host has it)';
  // dpkg installs as root only, and runs maintainer scripts chrooted into the root.
  if (process.getuid?.() !== 0) return 'installing with dpkg --root needs root';
  return undefined;
}

function query(args: string[]): string {
  const result = spawnSync('dpkg-query', args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`dpkg-query ${args.join(' ')} failed: ${result.stderr.trim()}`);
  return result.stdout;
}

/**
 * Makes `root` a system with this host's `packages` and nothing else: their files (at the paths
 * their packages list, so the root is laid out as they ship, whatever merged-/usr links this host
 * has), their status, file lists and md5sums in var/lib/dpkg, and a /dev/null for the maintainer
 * scripts, which dpkg runs chrooted there.
 */
export async function confinedRoot(root: string, packages: string[]): Promise<void> {
  const admin = path.join(root, 'var/lib/dpkg');
  await Promise.all(['info', 'updates', 'triggers'].map((d) => fs.mkdir(path.join(admin, d), { recursive: true })));
  await fs.mkdir(path.join(root, 'var/log'), { recursive: true });
  await fs.writeFile(path.join(admin, 'available'), '');
  const stanzas: string[] = [];
  for (const name of packages) {
    stanzas.push(query(['--status', name]).trim());
    // libc6:amd64 for a Multi-Arch: same package, dash for the others: the names of its info files.
    const id = query(['--show', '--showformat=${binary:Package}', name]);
    const files = query(['--listfiles', name])
      .split('\n')
      .filter((f) => f.startsWith('/') && f !== '/.');
    await fs.writeFile(path.join(admin, 'info', `${id}.list`), `/.\n${files.join('\n')}\n`);
    await fs.copyFile(`/var/lib/dpkg/info/${id}.md5sums`, path.join(admin, 'info', `${id}.md5sums`));
    for (const file of files) await copyInto(root, file);
  }
  await fs.writeFile(path.join(admin, 'status'), `${stanzas.join('\n\n')}\n`);
  await fs.mkdir(path.join(root, 'dev'), { recursive: true });
  const mknod = spawnSync('mknod', ['-m', '666', path.join(root, 'dev/null'), 'c', '1', '3'], { encoding: 'utf8' });
  if (mknod.status !== 0) throw new Error(`mknod ${root}/dev/null failed: ${mknod.stderr.trim()}`);
}

/** One listed path of a package: a directory (a link to one included) as a directory, a link as a link, a file as a copy. */
async function copyInto(root: string, file: string): Promise<void> {
  const target = path.join(root, file);
  if ((await fs.stat(file)).isDirectory()) return void (await fs.mkdir(target, { recursive: true }));
  await fs.mkdir(path.dirname(target), { recursive: true });
  if ((await fs.lstat(file)).isSymbolicLink()) await fs.symlink(await fs.readlink(file), target);
  else await fs.copyFile(file, target);
}

/** `dpkg --root ROOT ARGS…`: its exit code and what it wrote. */
export function dpkgIn(root: string, args: string[]): { status: number | null; output: string } {
  // Logged inside the root: the host's dpkg.cfg would log to the host's /var/log/dpkg.log.
  const result = spawnSync('dpkg', [`--root=${root}`, `--log=${path.join(root, 'var/log/dpkg.log')}`, ...args], {
    encoding: 'utf8',
  });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

/** `dpkg-query --root ROOT -W` of one package: its version and ${db:Status-Abbrev}; null when dpkg has no entry. */
export function queryIn(root: string, name: string): { version: string; abbrev: string } | null {
  const result = spawnSync('dpkg-query', [`--root=${root}`, '-W', '-f=${Version}\t${db:Status-Abbrev}', '--', name], {
    encoding: 'utf8',
  });
  if (result.status === 1 && /no packages found/.test(result.stderr)) return null;
  if (result.status !== 0) throw new Error(`dpkg-query --root=${root} -W ${name} failed: ${result.stderr.trim()}`);
  const [version, abbrev] = result.stdout.split('\t');
  return { version: version ?? '', abbrev: abbrev ?? '' };
}

/** An empty confined dpkg root at `root` (its database and its log directory), as an operator makes one for packages.root. */
export async function emptyDpkgRoot(root: string): Promise<string> {
  await fs.mkdir(path.join(root, 'var/lib/dpkg'), { recursive: true });
  await fs.mkdir(path.join(root, 'var/log'), { recursive: true });
  return root;
}

/** `echo "NAME SELECTION" | dpkg --root ROOT --set-selections` (hold, install). */
export function selectIn(root: string, name: string, selection: 'hold' | 'install'): void {
  const result = spawnSync('dpkg', [`--root=${root}`, '--set-selections'], { input: `${name} ${selection}\n`, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`dpkg --set-selections failed: ${result.stderr.trim()}`);
}

/**
 * The host's own dpkg database and log as they are now, and a check that nothing since mentions
 * `names`: the tests' packages never reach the machine's packages. Other sessions may install on
 * this host meanwhile, so the check is about the tests' names, not about the files' bytes.
 */
export async function hostDpkgUntouched(names: RegExp): Promise<() => Promise<void>> {
  const logSize = (await fs.stat('/var/log/dpkg.log').catch(() => ({ size: 0 }))).size;
  const statusBefore = await fs.readFile('/var/lib/dpkg/status', 'utf8');
  if (names.test(statusBefore)) throw new Error(`the host's dpkg status already names ${names}: clean it up first`);
  return async () => {
    const status = await fs.readFile('/var/lib/dpkg/status', 'utf8');
    const log = await fs.readFile('/var/log/dpkg.log').catch(() => Buffer.alloc(0));
    const added = log.subarray(Math.min(logSize, log.length)).toString('utf8');
    const problems = [
      ...(names.test(status) ? [`/var/lib/dpkg/status now names ${names}`] : []),
      ...(names.test(added)
        ? [
            `/var/log/dpkg.log gained lines naming ${names}: ${added
              .split('\n')
              .filter((l) => names.test(l))
              .join(' | ')}`,
          ]
        : []),
    ];
    if (problems.length > 0) throw new Error(problems.join('; '));
  };
}

/**
 * A flat apt repository of the .debs in `repo` (its Packages index written by scripts/build-deb.mjs)
 * and an APT_CONFIG file under `dir` that confines apt to it and to the dpkg database under
 * `root`: apt reads no file of the host's /etc/apt (so none of its hooks run), keeps its lists,
 * cache and logs under `dir`, and runs dpkg with --root and a log of its own. Returns the
 * config's path after an `apt-get update` with it.
 */
export async function confinedApt(dir: string, repo: string, root: string): Promise<string> {
  const { writePackagesIndex } = await import('../../scripts/build-deb.mjs');
  await writePackagesIndex(repo);
  for (const d of ['state', 'cache/archives/partial', 'log', 'empty']) await fs.mkdir(path.join(dir, d), { recursive: true });
  await fs.writeFile(path.join(dir, 'sources.list'), `deb [trusted=yes] file:${repo} ./\n`);
  const config = path.join(dir, 'apt.conf');
  await fs.writeFile(
    config,
    [
      'Dir::Etc::Main "/dev/null";',
      `Dir::Etc::Parts "${dir}/empty";`,
      `Dir::Etc::SourceList "${dir}/sources.list";`,
      `Dir::Etc::SourceParts "${dir}/empty";`,
      'Dir::Etc::Preferences "/dev/null";',
      `Dir::Etc::PreferencesParts "${dir}/empty";`,
      `Dir::State "${dir}/state";`,
      `Dir::State::status "${root}/var/lib/dpkg/status";`,
      `Dir::Cache "${dir}/cache";`,
      `Dir::Log "${dir}/log";`,
      `DPkg::Options { "--root=${root}"; "--log=${root}/var/log/dpkg.log"; };`,
      '',
    ].join('\n'),
  );
  const update = spawnSync('apt-get', ['-q', 'update'], { env: { ...process.env, APT_CONFIG: config }, encoding: 'utf8' });
  if (update.status !== 0) throw new Error(`apt-get update failed: ${update.stderr.trim()}`);
  return config;
}
