import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs, type Stats } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { MAX_SIGNATURE_BYTES, SIGNATURE_SUFFIX, isNodeId, withFix, type AuthorityRead } from '../contract';
import { InvalidDesiredState, InvalidInputError, missingArtifactFix, problemLine, type BoundIntent } from '../domain';
import { clip } from '../domain/bounds';
import { MAX_DESIRED_STATE_BYTES, parseDesiredStateText, tooLarge } from '../schemas/documents';

const run = promisify(execFile);

/** A checkout's git directory (index, HEAD) and the common one (refs; the same unless a worktree). */
interface GitRepo {
  gitDir: string;
  commonDir: string;
}

/**
 * What changes whenever git's answer about a file can change without its bytes changing: the
 * index (add, commit -a, reset), HEAD and the ref it names (commit, amend, checkout, reset), and
 * packed refs. Read with stat and one small read, no process, so an unchanged file in an
 * unchanged checkout costs no git process per read.
 */
async function repoStamp({ gitDir, commonDir }: GitRepo): Promise<string> {
  const head = (await fs.readFile(path.join(gitDir, 'HEAD'), 'utf8').catch(() => '')).trim();
  const ref = /^ref: (.+)$/.exec(head)?.[1];
  const files = [path.join(gitDir, 'index'), path.join(commonDir, 'packed-refs'), ...(ref ? [path.join(commonDir, ref)] : [])];
  const stamps = await Promise.all(
    files.map((f) =>
      fs.stat(f).then(
        (st) => `${st.mtimeMs}:${st.size}:${st.ino}`,
        () => '-',
      ),
    ),
  );
  return [head, ...stamps].join('|');
}

/** Why the file at `stat` is not read at all, or null: it must be a regular file within MAX_DESIRED_STATE_BYTES. */
function refuseToRead(stat: Stats, source: string): AuthorityRead | null {
  if (!stat.isFile()) {
    return {
      ok: false,
      kind: 'invalid',
      error: withFix(`${source}: invalid desired state; it is not a regular file`, 'make it a plain YAML file'),
    };
  }
  if (stat.size > MAX_DESIRED_STATE_BYTES) {
    return { ok: false, kind: 'invalid', error: new InvalidDesiredState(source, tooLarge('desired', stat.size)).message };
  }
  return null;
}

/**
 * The detached signature next to a desired-state file (<node>.yaml.sig), read as it is: the
 * controller holds no keys and checks only that it can be carried (the node's agent verifies it).
 * A signed file travels as text, so its bytes must be that text exactly (UTF-8).
 */
async function signatureOf(file: string, bytes: Buffer, text: string): Promise<{ signature?: string; problem?: string }> {
  const sigFile = `${file}${SIGNATURE_SUFFIX}`;
  const name = path.basename(sigFile);
  const fix = `sign the file again (datum sign ${path.basename(file)}), or remove ${name}`;
  let stat: Stats;
  try {
    stat = await fs.stat(sigFile);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
    return { problem: problemLine({ field: name, problem: `cannot be read (${(error as Error).message})`, fix }) };
  }
  if (!stat.isFile() || stat.size > MAX_SIGNATURE_BYTES)
    return {
      problem: problemLine({
        field: name,
        problem: stat.isFile()
          ? `is ${stat.size} bytes, more than an SSH signature (${MAX_SIGNATURE_BYTES})`
          : 'is not a regular file',
        fix,
      }),
    };
  if (!Buffer.from(text, 'utf8').equals(bytes))
    return {
      problem: problemLine({
        field: '(file)',
        problem: 'is signed but is not UTF-8 text, and a signed document travels to the node as its text',
        fix: 'save the file as UTF-8, then sign it again',
      }),
    };
  return { signature: await fs.readFile(sigFile, 'utf8') };
}

/**
 * The desired-state authority: `<fleet>/desired/nodes/<node>.yaml`, usually a git checkout.
 * Provenance is the git commit that last touched the file when the file is committed and clean,
 * otherwise the sha256 of its bytes. Relative artifact references are resolved against the
 * fleet directory here, after the digest is bound, so the digest covers what the author wrote.
 */
export class DesiredStateAuthority {
  private readonly provenanceCache = new Map<string, { stamp: string; revision: string; author: string | null }>();
  /** Directories found not to be in a git checkout (until the worker restarts): no git process per file there. */
  private readonly notGit = new Set<string>();
  /** The git directories of each checked-out directory, found once (one git process per directory). */
  private readonly repos = new Map<string, GitRepo>();
  /** Each file's text as last parsed and validated (by its sha256), with what it bound to. */
  private readonly parsed = new Map<string, { content: string; source: string; node: string; intent: BoundIntent }>();
  /** How many times this authority parsed and validated a file; an unchanged file costs a digest (issue 33). */
  parses = 0;

  constructor(readonly fleetDir: string) {}

  /** Every node the authority declares (desired/nodes/<node>.yaml), sorted. */
  async nodes(): Promise<string[]> {
    const files = await fs.readdir(path.join(this.fleetDir, 'desired', 'nodes'));
    return files
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => f.slice(0, -'.yaml'.length))
      .sort();
  }

  fileFor(node: string): string {
    return path.join(this.fleetDir, 'desired', 'nodes', `${node}.yaml`);
  }

  /**
   * Replaces the node's desired-state file with `text`, atomically (a temp file beside it, fsync,
   * rename): a reader sees the old file or the new one, never half of either. Only a command that
   * says so writes the authority (a rollback, docs/operations.md).
   */
  async replace(node: string, text: string): Promise<string> {
    if (!isNodeId(node)) throw new Error(withFix(`"${node}" is not a valid node name`, 'use letters, digits, ".", "_" or "-"'));
    const file = this.fileFor(node);
    const tmp = `${file}.datum-${process.pid}-${Date.now()}.tmp`;
    const handle = await fs.open(tmp, 'wx', 0o644);
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fs.rename(tmp, file);
    } catch (error) {
      await fs.rm(tmp, { force: true });
      throw error;
    }
    return file;
  }

  async read(node: string, now: Date = new Date()): Promise<AuthorityRead> {
    if (!isNodeId(node)) {
      return {
        ok: false,
        kind: 'unknown_node',
        error: withFix(`"${node}" is not a valid node name`, 'use letters, digits, ".", "_" or "-"'),
      };
    }
    const file = this.fileFor(node);
    const source = path.relative(this.fleetDir, file) || file;
    let bytes: Buffer;
    let stat: Stats;
    try {
      // The size and kind first: a huge file, a FIFO or a device must not be read at all.
      stat = await fs.stat(file);
      const refused = refuseToRead(stat, source);
      if (refused) return refused;
      bytes = await fs.readFile(file);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') {
        return {
          ok: false,
          kind: 'unknown_node',
          error: withFix(
            `no desired state for node "${node}": ${file} does not exist`,
            `add desired/nodes/${node}.yaml to the fleet at ${this.fleetDir}, or check the node name`,
          ),
        };
      }
      return { ok: false, kind: 'unreadable', error: `cannot read ${file}: ${(error as Error).message}` };
    }
    return await this.bind(node, { file, source, bytes, stat }, now);
  }

  /** The file read as desired state: parsed, its artifacts located, its signature carried. */
  private async bind(
    node: string,
    { file, source, bytes, stat }: { file: string; source: string; bytes: Buffer; stat: Stats },
    now: Date,
  ): Promise<AuthorityRead> {
    const text = bytes.toString('utf8');
    try {
      const { revision, author } = await this.provenance(file, text, stat);
      const intent = this.parse(text, { file, source, node }, { revision, author, loaded_at: now.toISOString() });
      const { locations, problems } = await this.resolveArtifacts(intent);
      const signed = await signatureOf(file, bytes, text);
      if (signed.problem) problems.push(signed.problem);
      if (problems.length > 0) {
        return {
          ok: false,
          kind: 'invalid',
          error: `${source}: invalid desired state; nothing from this file was applied:\n${problems.join('\n')}`,
        };
      }
      return {
        ok: true,
        intent: {
          ...intent,
          locations,
          ...(signed.signature ? { signed: { document: text, signature: signed.signature } } : {}),
        },
      };
    } catch (error) {
      if (error instanceof InvalidInputError) return { ok: false, kind: 'invalid', error: error.message };
      // Anything else a parse can throw is still this file's fault: the typed outcome, never a raw error.
      return {
        ok: false,
        kind: 'invalid',
        error: withFix(
          `${source}: invalid desired state; nothing from this file was applied: it cannot be read as desired state (${clip(String(error), 200)})`,
          'correct the file, or report the message if the file looks right',
        ),
      };
    }
  }

  /**
   * `text` parsed and validated as `node`'s desired state, once per content: a pass over an
   * unchanged fleet reads each file and checks its sha256, and only the provenance (a commit, the
   * time of the read) is bound anew. A file that fails is parsed again, to say why, every time.
   */
  private parse(
    text: string,
    { file, source, node }: { file: string; source: string; node: string },
    provenance: Omit<BoundIntent['provenance'], 'source'>,
  ): BoundIntent {
    const content = createHash('sha256').update(text).digest('hex');
    const known = this.parsed.get(file);
    if (known && known.content === content && known.source === source && known.node === node)
      return { ...known.intent, provenance: { source, ...provenance } };
    this.parses++;
    const intent = parseDesiredStateText(text, source, provenance, node);
    this.parsed.set(file, { content, source, node, intent });
    return intent;
  }

  /**
   * Where the agent fetches each artifact (a release's archive, a package's .deb): the intent's
   * `locations`; a missing file is a problem.
   */
  private async resolveArtifacts(intent: BoundIntent): Promise<{ locations: Record<string, string>; problems: string[] }> {
    const problems: string[] = [];
    const locations: Record<string, string> = {};
    for (const [key, spec] of Object.entries(intent.resources)) {
      const artifact = 'artifact' in spec ? spec.artifact : undefined;
      if (artifact === undefined) continue;
      if (/^https?:\/\//i.test(artifact)) {
        locations[key] = artifact;
        continue;
      }
      const absolute = path.resolve(this.fleetDir, artifact);
      try {
        const st = await fs.stat(absolute);
        if (!st.isFile()) throw new Error('not a regular file');
        locations[key] = absolute;
      } catch {
        problems.push(
          problemLine({
            field: `resources.${key}.artifact`,
            problem: `${artifact} does not exist (looked at ${absolute})`,
            fix: missingArtifactFix(spec.type),
          }),
        );
      }
    }
    return { locations, problems };
  }

  private async provenance(file: string, text: string, stat: Stats): Promise<{ revision: string; author: string | null }> {
    const dir = path.dirname(file);
    const repo = await this.repoOf(dir);
    // The file's bytes and git's view of them: a commit, a `git add` or a reset changes the
    // provenance of a file whose bytes did not change, and must not be answered from the cache.
    const stamp = `${stat.mtimeMs}:${stat.size}:${stat.ino}|${repo ? await repoStamp(repo) : 'not git'}`;
    const cached = this.provenanceCache.get(file);
    if (cached && cached.stamp === stamp) return cached;
    const digest = `sha256:${createHash('sha256').update(text).digest('hex')}`;
    let result = { stamp, revision: digest, author: null as string | null };
    try {
      if (!repo) throw new Error('not a git checkout');
      const status = await run('git', ['-C', dir, 'status', '--porcelain', '--', path.basename(file)], { timeout: 5000 });
      if (status.stdout.trim() === '') {
        const log = await run('git', ['-C', dir, 'log', '-1', '--format=%H%n%an <%ae>', '--', path.basename(file)], {
          timeout: 5000,
        });
        const [commit, author] = log.stdout.trim().split('\n');
        if (commit) result = { stamp, revision: `git:${commit}`, author: author ?? null };
      }
    } catch {
      // Not a git checkout (or no git): the content hash is the revision.
    }
    this.provenanceCache.set(file, result);
    return result;
  }

  /** The git directories of the checkout `dir` is in, or null when it is in none (remembered until the worker restarts). */
  private async repoOf(dir: string): Promise<GitRepo | null> {
    if (this.notGit.has(dir)) return null;
    const known = this.repos.get(dir);
    if (known) return known;
    try {
      const { stdout } = await run('git', ['-C', dir, 'rev-parse', '--absolute-git-dir', '--git-common-dir'], { timeout: 5000 });
      const [gitDir, common] = stdout.trim().split('\n');
      const repo = { gitDir, commonDir: path.resolve(dir, common ?? gitDir) };
      this.repos.set(dir, repo);
      return repo;
    } catch (error) {
      // Exit 128 is git's "not a git repository"; anything else (a timeout, no git) may pass next time.
      if ((error as { code?: unknown }).code === 128) this.notGit.add(dir);
      return null;
    }
  }
}
