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
