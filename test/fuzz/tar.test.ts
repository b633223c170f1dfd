import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIX } from '../../src/contract';
import { inspectArchive } from '../../src/agent/fs/artifact';
import { AgentRefusal } from '../../src/agent/refusal';
import { RUNS } from './generators';

/*
 * Fuzzing release archives (issue 10, must-show 2): tar.gz files with hostile entries (absolute
 * paths, "..", symlinks and hardlinks out, devices and FIFOs, duplicates, entries below a
 * symlink, Datum's own record name, huge names) mixed into benign ones, written to a temp dir and
 * inspected as the agent does before unpacking. Every archive with a hostile entry is refused with
 * a typed refusal that names the entry and the fix; nothing else is ever thrown; nothing is
 * unpacked (inspection only reads); a benign archive is admitted whole.
 */

interface Entry {
  name: string;
  /** ustar type flag: 0 file, 1 hardlink, 2 symlink, 3 char device, 4 block device, 5 dir, 6 FIFO. */
  flag: string;
  link?: string;
  content?: string;
}

/** One ustar header block; names or link targets over 100 bytes go in a PAX header first. */
function header(name: string, flag: string, size: number, link = ''): Buffer {
  const h = Buffer.alloc(512);
  const put = (text: string, at: number, len: number) => Buffer.from(text).copy(h, at, 0, len);
  const octal = (n: number, at: number, len: number) => put(`${n.toString(8).padStart(len - 1, '0')}\0`, at, len);
  put(name, 0, 100);
  octal(flag === '5' ? 0o755 : 0o644, 100, 8);
  octal(0, 108, 8);
  octal(0, 116, 8);
  octal(size, 124, 12);
  octal(946684800, 136, 12);
  put(flag, 156, 1);
  put(link, 157, 100);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return h;
}

const pad = (b: Buffer) => Buffer.concat([b, Buffer.alloc((512 - (b.length % 512)) % 512)]);

function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = body.length + 1;
  while (`${len}${body}`.length !== len) len = `${len}${body}`.length;
  return `${len}${body}`;
}

function tarGz(entries: Entry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const long = Buffer.byteLength(e.name) > 99 || Buffer.byteLength(e.link ?? '') > 99;
    if (long) {
      const pax = Buffer.from(paxRecord('path', e.name) + (e.link ? paxRecord('linkpath', e.link) : ''));
      blocks.push(header('PaxHeader', 'x', pax.length), pad(pax));
    }
    const body = Buffer.from(e.flag === '0' ? (e.content ?? '') : '');
    blocks.push(header(e.name.slice(0, 99), e.flag, body.length, (e.link ?? '').slice(0, 99)));
    if (body.length > 0) blocks.push(pad(body));
  }
  blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks), { level: 1 });
}

const seg = fc.stringMatching(/^[a-z][a-z0-9_.-]{0,6}$/).filter((s) => s !== '.' && s !== '..');
const rel = fc.array(seg, { minLength: 1, maxLength: 3 }).map((s) => s.join('/'));

/** Benign entries: files under their directories, an inner symlink, a hardlink to an earlier file. */
const benign = fc.uniqueArray(rel, { minLength: 1, maxLength: 6, selector: (p) => p.split('/')[0] }).map((paths) => {
  const out: Entry[] = [];
  for (const p of paths) {
    const dir = `d-${p.split('/')[0]}`;
    out.push({ name: `${dir}/`, flag: '5' }, { name: `${dir}/${p.replace(/\//g, '_')}`, flag: '0', content: p });
  }
  const first = out[1].name;
  out.push({ name: 'inner-link', flag: '2', link: first }, { name: 'hard', flag: '1', link: first });
  return out;
});

/** One hostile entry and how the refusal must name it. */
interface Hostile {
  what: string;
  entry: Entry[];
  names: string;
  mustReject: boolean;
}
const hostile: fc.Arbitrary<Hostile> = fc.oneof<fc.Arbitrary<Hostile>[]>(
  rel.map((p) => ({ what: 'absolute path', entry: [{ name: `/${p}`, flag: '0' }], names: `/${p}`, mustReject: true })),
  rel.map((p) => ({ what: 'dot-dot', entry: [{ name: `../${p}`, flag: '0' }], names: `../${p}`, mustReject: true })),
  rel.map((p) => ({
    what: 'inner dot-dot',
    entry: [{ name: `a/../../${p}`, flag: '0' }],
    names: `a/../../${p}`,
    mustReject: true,
  })),
  fc.constantFrom('/etc', '../..', '../../../etc/passwd', 'a/../../..', '/').map((t) => ({
    what: `symlink out to ${t}`,
    entry: [{ name: 'out', flag: '2', link: t }],
    names: 'out',
    mustReject: true,
  })),
  fc.constantFrom('/etc/passwd', '../x', '../../etc/shadow').map((t) => ({
    what: `hardlink out to ${t}`,
    entry: [{ name: 'hl', flag: '1', link: t }],
    names: 'hl',
    mustReject: true,
  })),
  fc
    .constantFrom('3', '4', '6')
    .map((flag) => ({ what: `device/FIFO ${flag}`, entry: [{ name: 'dev', flag }], names: 'dev', mustReject: true })),
  fc.constant({
    what: 'below a symlink',
    entry: [
      { name: 'ln', flag: '2', link: '.' },
      { name: 'ln/x', flag: '0', content: 'x' },
    ],
    names: 'ln/x',
    mustReject: true,
  }),
  fc.constant({
    what: 'duplicate',
    entry: [
      { name: 'dup', flag: '0' },
      { name: './dup', flag: '0' },
    ],
    names: 'dup',
    mustReject: true,
  }),
  fc.constant({
    what: "Datum's own record",
    entry: [{ name: '.datum-release.json', flag: '0' }],
    names: '.datum-release.json',
    mustReject: true,
  }),
  // A name of a few KB: admitted or refused, but typed either way (the OS may not create it).
  fc
    .integer({ min: 100, max: 8000 })
    .map((n) => ({ what: `name of ${n} bytes`, entry: [{ name: 'n'.repeat(n), flag: '0' }], names: 'nnnn', mustReject: false })),
  fc
    .constantFrom('7', 'g', 'K', 'V', 'S')
    .map((flag) => ({ what: `type flag ${flag}`, entry: [{ name: 'odd', flag }], names: 'odd', mustReject: false })),
);

const REFUSAL_TYPES = ['PathOutsideRoot', 'InvalidAction', 'SizeLimitExceeded', 'ArtifactUnavailable'];

let dir: string;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-fuzz-tar-'));
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

describe('fuzzing release archives', () => {
  it(`${RUNS} archives: a hostile entry is refused by type, naming the entry and the fix; a benign archive is admitted whole`, async () => {
    const file = () => path.join(dir, 'artifact.tgz');
    await fc.assert(
      fc.asyncProperty(benign, fc.option(hostile, { freq: 4 }), fc.nat(), async (good, bad, at) => {
        const entries = [...good];
        if (bad) entries.splice(at % (entries.length + 1), 0, ...bad.entry);
        await fs.writeFile(file(), tarGz(entries));
        let admitted: Map<string, string> | null = null;
        try {
          admitted = await inspectArchive(file());
        } catch (error) {
          // Typed only: a refusal the agent turns into a non-retryable failure of its type.
          if (!(error instanceof AgentRefusal)) throw new Error(`untyped error: ${String(error)}`, { cause: error });
          expect(REFUSAL_TYPES).toContain(error.type);
          expect(error.message).toContain(FIX);
          if (bad && error.type !== 'ArtifactUnavailable') expect(error.message).toContain(bad.names.slice(0, 40));
        }
        if (bad?.mustReject) expect(admitted, `${bad.what} was admitted`).toBeNull();
        if (!bad) expect(admitted?.size).toBe(good.filter((e) => e.name !== '').length);
        // Inspection unpacks nothing: the archive is all there is.
        expect(await fs.readdir(dir)).toEqual(['artifact.tgz']);
      }),
      { numRuns: RUNS },
    );
  }, 120_000);
});
