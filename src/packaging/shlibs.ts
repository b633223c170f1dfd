/*
 * The packages depend on what their ELF files (the Node.js runtime, the Temporal SDK's native
 * module) need from the system, read from the files themselves (src/packaging/elf.ts), as
 * dpkg-shlibdeps and rpmbuild would for packages built the usual way:
 *   .deb  the Debian package that ships each library, at least at the version that first provided
 *         the newest symbol version used: libc6 (>= 2.28) for GLIBC_2.28, libstdc++6 (>= 5.1)
 *         for GLIBCXX_3.4.21, libgcc-s1 (>= 4.2) for GCC_4.2.0;
 *   .rpm  what rpmbuild's find-requires writes, the newest of each version family per library:
 *         libc.so.6(GLIBC_2.28)(64bit), libstdc++.so.6(GLIBCXX_3.4.21)(64bit) …
 * Only glibc, libstdc++ and libgcc_s are accepted: a Node.js built by a distribution (linked
 * against its own libnode, libuv, OpenSSL) would make a package that runs on that release only.
 */
import { dynamicNeeds, isElf } from './elf';
import { PackagingError } from './errors';

type Version = number[];

const parse = (text: string): Version => text.split('.').map(Number);
const compare = (a: Version, b: Version): number => {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
  return 0;
};
const newest = (versions: Version[]): Version | undefined =>
  versions.reduce<Version | undefined>((m, v) => (m && compare(m, v) >= 0 ? m : v), undefined);

/**
 * The GCC release that introduced each libstdc++ symbol version, as [release, N of GLIBCXX_3.4.N,
 * N of CXXABI_1.3.N] (libstdc++ manual, "ABI Policy and Guidelines"). libstdc++6 is versioned as
 * the GCC it is built from.
 */
const LIBSTDCXX_RELEASES: [release: string, glibcxx: number, cxxabi: number][] = [
  ['4.8', 18, 7],
  ['4.8.3', 19, 7],
  ['4.9', 20, 8],
  ['5.1', 21, 9],
  ['6.1', 22, 10],
  ['7.1', 23, 11],
  ['7.2', 24, 11],
  ['8.1', 25, 11],
  ['9.1', 26, 12],
  ['9.2', 27, 12],
  ['9.3', 28, 12],
  ['11.1', 29, 13],
  ['12.1', 30, 13],
  ['13.1', 31, 14],
  ['13.2', 32, 14],
  ['14.1', 33, 15],
];

function libstdcxxRelease(family: string, version: Version): Version | undefined {
  if (family !== 'GLIBCXX' && family !== 'CXXABI') return undefined;
  // GLIBCXX_3.4 and CXXABI_1.3 themselves, and the versions older than the first row, are in every release listed.
  const minor = version[2] ?? 0;
  const row = LIBSTDCXX_RELEASES.find(([, glibcxx, cxxabi]) => (family === 'GLIBCXX' ? glibcxx : cxxabi) >= minor);
  return row ? parse(row[0]) : undefined;
}

interface SystemLibrary {
  /** The Debian package that ships it (the names of Debian 11 and later, Ubuntu 20.04 and later). */
  deb: string;
  sonames: RegExp;
  /** The package version that first provided a symbol version, or undefined for a version this library never had. */
  since: (family: string, version: Version) => Version | undefined;
}

const SYSTEM_LIBRARIES: SystemLibrary[] = [
  {
    deb: 'libc6',
    sonames:
      /^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$/,
    // Versioned as glibc itself: GLIBC_2.28 came with glibc 2.28.
    since: (family, version) => (family === 'GLIBC' ? version : undefined),
  },
  { deb: 'libstdc++6', sonames: /^libstdc\+\+\.so\.6$/, since: libstdcxxRelease },
  {
    deb: 'libgcc-s1',
    sonames: /^libgcc_s\.so\.1$/,
    // Named after the GCC release that introduced them: GCC_4.2.0 came with GCC 4.2.
    since: (family, version) => (family === 'GCC' ? version.slice(0, 2) : undefined),
  },
];

const OFFICIAL_NODE =
  'run `npm run package` with an official Node.js build (nodejs.org or NodeSource), which needs glibc and libstdc++ only';

export interface SystemDependencies {
  /** nfpm's `depends` for the .deb: "libc6 (>= 2.28)" … */
  deb: string[];
  /** For the .rpm: "libc.so.6(GLIBC_2.28)(64bit)" … */
  rpm: string[];
}

/** The system libraries the ELF files among `files` need, as the .deb's and the .rpm's dependencies. */
export async function systemDependencies(files: string[], arch: string = process.arch): Promise<SystemDependencies> {
  const required = await requiredVersions(files, arch);
  return { deb: debDepends(required), rpm: rpmRequires(required) };
}

/** soname → version family → the versions of it required: libc.so.6 → GLIBC → [[2, 2, 5], [2, 28] …]. */
type Required = Map<string, Map<string, Version[]>>;

async function requiredVersions(files: string[], arch: string): Promise<Required> {
  const required: Required = new Map();
  for (const file of files) {
    if (!(await isElf(file))) continue;
    const needs = await dynamicNeeds(file, arch);
    for (const soname of new Set([...needs.needed, ...needs.versions.keys()])) {
      if (!SYSTEM_LIBRARIES.some((l) => l.sonames.test(soname)))
        throw new PackagingError(`${file} needs ${soname}, which is not part of glibc, libstdc++ or libgcc_s`, OFFICIAL_NODE);
      const families = required.get(soname) ?? new Map<string, Version[]>();
      required.set(soname, families);
      for (const name of needs.versions.get(soname) ?? []) {
        const match = /^([A-Z]+)_(\d+(?:\.\d+)*)$/.exec(name);
        if (!match)
          throw new PackagingError(`${file} needs ${name} from ${soname}, a private or unknown symbol version`, OFFICIAL_NODE);
        families.set(match[1], [...(families.get(match[1]) ?? []), parse(match[2])]);
      }
    }
  }
  return required;
}

function debDepends(required: Required): string[] {
  const deb: string[] = [];
  for (const library of SYSTEM_LIBRARIES) {
    const sonames = [...required.keys()].filter((s) => library.sonames.test(s));
    if (sonames.length === 0) continue;
    const since = sonames.flatMap((soname) =>
      [...required.get(soname)!].flatMap(([family, versions]) =>
        versions.map((version) => {
          const release = library.since(family, version);
          if (!release)
            throw new PackagingError(
              `${soname} ${family}_${version.join('.')} is newer than any release of ${library.deb} src/packaging/shlibs.ts knows`,
              'add the release that introduced it to src/packaging/shlibs.ts (libstdc++ manual, "ABI Policy and Guidelines")',
            );
          return release;
        }),
      ),
    );
    const version = newest(since);
    deb.push(version ? `${library.deb} (>= ${version.join('.')})` : library.deb);
  }
  return deb;
}

// Both architectures the SDK ships a native module for are 64-bit, which rpm marks.
function rpmRequires(required: Required): string[] {
  const rpm: string[] = [];
  for (const soname of [...required.keys()].sort()) {
    const families = required.get(soname)!;
    if (families.size === 0) rpm.push(`${soname}()(64bit)`);
    for (const family of [...families.keys()].sort())
      rpm.push(`${soname}(${family}_${newest(families.get(family)!)!.join('.')})(64bit)`);
  }
  return rpm;
}
