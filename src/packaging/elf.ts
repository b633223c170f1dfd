/*
 * What a Linux program or shared object asks of the system's dynamic linker, read from its ELF
 * file: the libraries it names (DT_NEEDED) and, for each, the symbol versions it was linked
 * against (the GNU version references, `.gnu.version_r`: GLIBC_2.28, GLIBCXX_3.4.21 …), which
 * `objdump -p` lists as "Version References". Read here rather than by running objdump so that
 * `npm run package` needs no binutils. 64-bit little-endian only: x86-64 and AArch64, the two
 * architectures the Temporal SDK ships a native module for.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { PackagingError } from './errors';

export interface DynamicNeeds {
  /** The sonames the file names, in its order: libc.so.6, libstdc++.so.6 … */
  needed: string[];
  /** The symbol versions it requires, by the soname that provides them. */
  versions: Map<string, string[]>;
}

/** e_machine of the ELF header, by Node's name for the architecture. */
const MACHINES: Record<string, number> = { x64: 62, arm64: 183 };

const SHT_DYNAMIC = 6;
const SHT_GNU_VERNEED = 0x6ffffffe;
const DT_NULL = 0;
const DT_NEEDED = 1;

/** `file`'s needs from the dynamic linker, refused unless it is an ELF file for `arch`. */
export async function dynamicNeeds(file: string, arch: string = process.arch): Promise<DynamicNeeds> {
  const handle = await open(file, 'r');
  try {
    return await readNeeds(handle, file, arch);
  } finally {
    await handle.close();
  }
}

/** True when the file starts with the ELF magic number. */
export async function isElf(file: string): Promise<boolean> {
  const handle = await open(file, 'r');
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(4), 0, 4, 0);
    return bytesRead === 4 && buffer.toString('latin1') === '\x7fELF';
  } finally {
    await handle.close();
  }
}

async function readNeeds(handle: FileHandle, file: string, arch: string): Promise<DynamicNeeds> {
  const at = async (offset: bigint | number, length: bigint | number) => {
    const buffer = Buffer.alloc(Number(length));
    await handle.read(buffer, 0, buffer.length, Number(offset));
    return buffer;
  };
  const header = await at(0, 64);
  const machine = MACHINES[arch];
  if (header.toString('latin1', 0, 4) !== '\x7fELF' || header[4] !== 2 || header[5] !== 1 || header.readUInt16LE(18) !== machine)
    throw new PackagingError(
      `${file} is not a 64-bit little-endian ELF file for ${arch} (e_machine ${machine ?? 'unknown'})`,
      'build the packages on an x64 or arm64 Linux machine, with a Node.js built for it',
    );
  const sections = await at(header.readBigUInt64LE(40), header.readUInt16LE(58) * header.readUInt16LE(60));
  const section = (i: number) => {
    const s = i * 64;
    return {
      type: sections.readUInt32LE(s + 4),
      offset: sections.readBigUInt64LE(s + 24),
      size: sections.readBigUInt64LE(s + 32),
      link: sections.readUInt32LE(s + 40),
      info: sections.readUInt32LE(s + 44),
    };
  };
  const count = header.readUInt16LE(60);
  const all = Array.from({ length: count }, (_, i) => section(i));
  // Both tables name their strings by offset into the section their sh_link points at (.dynstr).
  const stringsOf = async (s: ReturnType<typeof section>) => {
    const table = all[s.link];
    const bytes = await at(table.offset, table.size);
    return (offset: number) => bytes.toString('latin1', offset, bytes.indexOf(0, offset));
  };

  const needed: string[] = [];
  const dynamic = all.find((s) => s.type === SHT_DYNAMIC);
  if (dynamic) {
    const str = await stringsOf(dynamic);
    const entries = await at(dynamic.offset, dynamic.size);
    for (let e = 0; e + 16 <= entries.length; e += 16) {
      const tag = entries.readBigInt64LE(e);
      if (tag === BigInt(DT_NULL)) break;
      if (tag === BigInt(DT_NEEDED)) needed.push(str(Number(entries.readBigUInt64LE(e + 8))));
    }
  }

  const versions = new Map<string, string[]>();
  const verneed = all.find((s) => s.type === SHT_GNU_VERNEED);
  if (verneed) {
    const str = await stringsOf(verneed);
    const table = await at(verneed.offset, verneed.size);
    // Elf64_Verneed {vn_version, vn_cnt: u16; vn_file, vn_aux, vn_next: u32}, each followed (at
    // vn_aux) by vn_cnt Elf64_Vernaux {vna_hash: u32; vna_flags, vna_other: u16; vna_name, vna_next: u32}.
    for (let n = 0, v = 0; n < verneed.info; n++) {
      const names: string[] = [];
      for (let k = 0, a = v + table.readUInt32LE(v + 8); k < table.readUInt16LE(v + 2); k++) {
        names.push(str(table.readUInt32LE(a + 8)));
        a += table.readUInt32LE(a + 12);
      }
      versions.set(str(table.readUInt32LE(v + 4)), names);
      v += table.readUInt32LE(v + 12);
    }
  }
  return { needed, versions };
}
