// Separate hosts on one machine, for tests of a fleet across machines: each host a network
// namespace with its own address and hostname, all on one switch (a bridge in a namespace of its
// own). A host is cut off by taking its port on the switch down, as a pulled cable would: its
// packets are dropped, nobody is told. Traffic stays between the namespaces made here; the
// machine's own interfaces, routes and addresses are never touched. Needs root and iproute2.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Host {
  name: string;
  /** The host's network namespace. */
  ns: string;
  /** Its address on the switch (10.88.0.<n>/24). */
  ip: string;
}

export interface HostProcess {
  child: ChildProcess;
  output(): string;
}

export class Hosts {
  private readonly children: ChildProcess[] = [];
  private readonly made: string[] = [];

  private constructor(
    private readonly prefix: string,
    readonly byName: Record<string, Host>,
  ) {}

  /** Namespaces for `names` (at most 8 letters each) on one switch, as 10.88.0.1, .2, … in that order. */
  static async create(names: string[]): Promise<Hosts> {
    if (process.getuid?.() !== 0) {
      throw new Error('separate hosts need network namespaces, which only root can make — fix: run the tests as root (CI does)');
    }
    const prefix = `dt${randomBytes(3).toString('hex')}`;
    const hosts = new Hosts(prefix, {});
    // A test process that ends without remove() (a crash, a timeout) must not leave hosts behind.
    process.once('exit', hosts.removeNow);
    const net = `${prefix}-net`;
    try {
      await hosts.ip(['netns', 'add', net]);
      hosts.made.push(net);
      await hosts.ip(['-n', net, 'link', 'add', 'sw', 'type', 'bridge']);
      await hosts.ip(['-n', net, 'link', 'set', 'sw', 'up']);
      for (const [i, name] of names.entries()) {
        const ns = `${prefix}-${name}`;
        await hosts.ip(['netns', 'add', ns]);
        hosts.made.push(ns);
        await hosts.ip(['-n', ns, 'link', 'set', 'lo', 'up']);
        // The host's eth0, and its port on the switch, made as one pair across the two namespaces.
        await hosts.ip(['-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', `p-${name}`, 'netns', net]);
        await hosts.ip(['-n', net, 'link', 'set', `p-${name}`, 'master', 'sw', 'up']);
        const ip = `10.88.0.${i + 1}`;
        await hosts.ip(['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', 'eth0']);
        await hosts.ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
        hosts.byName[name] = { name, ns, ip };
      }
    } catch (error) {
      hosts.remove();
      throw error;
    }
    return hosts;
  }

  host(name: string): Host {
    const host = this.byName[name];
    if (!host) throw new Error(`no host ${name} among ${Object.keys(this.byName).join(', ')}`);
    return host;
  }

  /** The command line that runs `argv` on `name`: in its namespace, with its own hostname (a UTS namespace). */
  private on(name: string, argv: string[]): string[] {
    const { ns } = this.host(name);
    return ['ip', 'netns', 'exec', ns, 'unshare', '--uts', 'sh', '-c', `hostname ${name} && exec "$@"`, 'sh', ...argv];
  }

  /** Runs a command on a host to its end: its exit code and output. */
  async exec(name: string, argv: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 120_000) {
    const [cmd, ...args] = this.on(name, argv);
    return await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        cmd,
        args,
        { env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
        (error, stdout, stderr) => {
          const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
          resolve({ code, stdout, stderr: `${stderr}${error && code === null ? `\n${error.message}` : ''}` });
        },
      );
    });
  }

  /** Starts a long-running process on a host; remove() stops it. */
  start(name: string, argv: string[], env: NodeJS.ProcessEnv = {}): HostProcess {
    const [cmd, ...args] = this.on(name, argv);
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    this.children.push(child);
    let output = '';
    child.stdout.on('data', (b: Buffer) => (output = (output + b.toString()).slice(-200_000)));
    child.stderr.on('data', (b: Buffer) => (output = (output + b.toString()).slice(-200_000)));
    return { child, output: () => output };
  }

  /** Takes the host's port on the switch down: its packets go nowhere, and no peer is told. */
  async cut(name: string): Promise<void> {
    await this.ip(['-n', `${this.prefix}-net`, 'link', 'set', `p-${name}`, 'down']);
  }

  async mend(name: string): Promise<void> {
    await this.ip(['-n', `${this.prefix}-net`, 'link', 'set', `p-${name}`, 'up']);
  }

  /** Stops every process started on the hosts (and what they started), then removes the namespaces. */
  remove(): void {
    this.removeNow();
    process.removeListener('exit', this.removeNow);
  }

  /** remove(), synchronous, so that it also runs from process.on('exit'). */
  private readonly removeNow = (): void => {
    for (const child of this.children) {
      if (child.pid !== undefined && child.exitCode === null) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    for (const ns of this.made) {
      // Anything still in the namespace (a service an agent started, say) goes with it.
      const pids = spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
      for (const pid of pids) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    for (const ns of this.made.reverse()) spawnSync('ip', ['netns', 'del', ns]);
    this.made.length = 0;
  };

  private async ip(args: string[]): Promise<void> {
    await run('ip', args).catch((error: { stderr?: string; message: string }) => {
      throw new Error(`ip ${args.join(' ')} failed: ${error.stderr?.trim() || error.message}`);
    });
  }
}
