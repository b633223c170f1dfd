// Readers for the agent's packages, so a test can look inside a .deb and an .rpm with no dpkg,
// rpm or ar installed: an ar archive's members, a (gzipped) tar's entries, an RPM header's tags.
import { gunzipSync } from 'node:zlib';
import * as tar from 'tar';

/** What a package installs at one path, as the tests compare it across formats. */
export interface Installed {
  type: 'file' | 'dir' | 'symlink';
  mode: number;
  /** A symlink's target. */
  target?: string;
}

/** A link's own mode means nothing on Linux (formats write 0, 0755 or 0777): only its target counts. */
const installed = (type: Installed['type'], mode: number, target?: string): Installed =>
  type === 'symlink' ? { type, mode: 0, target } : { type, mode: mode & 0o7777 };

/** The members of an ar archive (a .deb is one: debian-binary, control.tar.*, data.tar.*). */
export function arMembers(archive: Buffer): Map<string, Buffer> {
  if (archive.subarray(0, 8).toString('latin1') !== '!<arch>\n') throw new Error('not an ar archive');
  const members = new Map<string, Buffer>();
  for (let at = 8; at + 60 <= archive.length;) {
    const header = archive.subarray(at, at + 60).toString('latin1');
    const name = header.slice(0, 16).trim().replace(/\/$/, '');
    const size = Number(header.slice(48, 58).trim());
    members.set(name, archive.subarray(at + 60, at + 60 + size));
    at += 60 + size + (size % 2); // members start on even offsets
  }
  return members;
}

/** A tar archive's entries by absolute path ("./usr/bin/x" → "/usr/bin/x"), with their text for small files. */
export function tarEntries(
  archive: Buffer,
  textOf: string[] = [],
): { entries: Map<string, Installed>; texts: Map<string, string> } {
  const entries = new Map<string, Installed>();
  const texts = new Map<string, string>();
  const parser = new tar.Parser({
    onReadEntry: (entry) => {
      const name = `/${entry.path.replace(/^\.?\//, '')}`.replace(/\/$/, '') || '/';
      const type = entry.type === 'Directory' ? 'dir' : entry.type === 'SymbolicLink' ? 'symlink' : 'file';
      entries.set(name, installed(type, entry.mode ?? 0, entry.linkpath));
      if (!textOf.includes(name)) return entry.resume();
      const chunks: Buffer[] = [];
      entry.on('data', (c: Buffer) => chunks.push(c));
      entry.on('end', () => texts.set(name, Buffer.concat(chunks).toString('utf8')));
    },
  });
  parser.end(archive);
  return { entries, texts };
}

/** gunzip when the bytes are gzip (nfpm is told to gzip both formats). */
export const gunzip = (bytes: Buffer): Buffer => (bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes);

// RPM header tags (rpm's lib/rpmtag.h).
const TAG = {
  name: 1000,
  version: 1001,
  release: 1002,
  license: 1014,
  postin: 1024,
  postun: 1026,
  fileModes: 1030,
  fileLinkTos: 1036,
  fileFlags: 1037,
  requireName: 1049,
  requireVersion: 1050,
  dirIndexes: 1116,
  baseNames: 1117,
  dirNames: 1118,
} as const;
const RPMFILE_CONFIG = 1;

type TagValue = string | string[] | number[];

/** The tags of the header structure at `at`, and where the structure ends. */
function rpmHeader(rpm: Buffer, at: number): { tags: Map<number, TagValue>; end: number } {
  if (rpm.readUInt32BE(at) !== 0x8eade801) throw new Error(`no RPM header at offset ${at}`);
  const count = rpm.readUInt32BE(at + 8);
  const storeSize = rpm.readUInt32BE(at + 12);
  const store = at + 16 + count * 16;
  const tags = new Map<number, TagValue>();
  for (let i = 0; i < count; i++) {
    const entry = at + 16 + i * 16;
    const [tag, type, offset, n] = [0, 4, 8, 12].map((o) => rpm.readUInt32BE(entry + o));
    const from = store + offset;
    const strings = () => {
      const out: string[] = [];
      for (let p = from; out.length < n;) {
        const zero = rpm.indexOf(0, p);
        out.push(rpm.toString('utf8', p, zero));
        p = zero + 1;
      }
      return out;
    };
    if (type === 6)
      tags.set(tag, strings()[0]); // STRING
    else if (type === 8 || type === 9)
      tags.set(tag, strings()); // STRING_ARRAY, I18NSTRING
    else if (type === 4)
      tags.set(
        tag,
        Array.from({ length: n }, (_, k) => rpm.readUInt32BE(from + 4 * k)),
      ); // INT32
    else if (type === 3)
      tags.set(
        tag,
        Array.from({ length: n }, (_, k) => rpm.readUInt16BE(from + 2 * k)),
      ); // INT16
  }
  return { tags, end: store + storeSize };
}

export interface RpmPackage {
  name: string;
  version: string;
  release: string;
  license: string;
  requires: string[];
  postin: string;
  postun: string;
  files: Map<string, Installed>;
  configFiles: string[];
}

/** An .rpm's metadata and file list, from its header (after the 96-byte lead and the signature header). */
export function readRpm(rpm: Buffer): RpmPackage {
  const signature = rpmHeader(rpm, 96);
  const { tags } = rpmHeader(rpm, signature.end + ((8 - (signature.end % 8)) % 8));
  const str = (tag: number) => (tags.get(tag) as string | undefined) ?? '';
  const list = <T extends string | number>(tag: number) => (tags.get(tag) as T[] | undefined) ?? [];
  const dirs = list<string>(TAG.dirNames);
  const modes = list<number>(TAG.fileModes);
  const links = list<string>(TAG.fileLinkTos);
  const flags = list<number>(TAG.fileFlags);
  const files = new Map<string, Installed>();
  const configFiles: string[] = [];
  list<number>(TAG.dirIndexes).forEach((dir, i) => {
    const file = `${dirs[dir]}${list<string>(TAG.baseNames)[i]}`;
    const kind = modes[i] & 0o170000;
    const type = kind === 0o040000 ? 'dir' : kind === 0o120000 ? 'symlink' : 'file';
    files.set(file, installed(type, modes[i], links[i]));
    if (flags[i] & RPMFILE_CONFIG) configFiles.push(file);
  });
  const versions = list<string>(TAG.requireVersion);
  return {
    name: str(TAG.name),
    version: str(TAG.version),
    release: str(TAG.release),
    license: str(TAG.license),
    requires: list<string>(TAG.requireName).map((name, i) => (versions[i] ? `${name} ${versions[i]}` : name)),
    postin: str(TAG.postin),
    postun: str(TAG.postun),
    files,
    configFiles,
  };
}
