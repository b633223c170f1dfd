// Types for scripts/build-deb.mjs, so TypeScript tests can import it.
export interface BuildDebOptions {
  /** The package's name (Debian policy: lower case, digits, "+", "-", "."). */
  name: string;
  /** Its Debian version, such as "1.1-1". */
  version: string;
  /** "all" (default), or an architecture such as amd64. */
  architecture?: string;
  /** Directory for the .deb and its .sha256 (default: the working directory). */
  outDir?: string;
  /** The file's name (default <name>_<version>_<architecture>.deb). */
  fileName?: string;
  /** Files the package installs besides usr/share/<name>/version.txt, by path without a leading slash. */
  files?: Record<string, { content: string; mode?: number }>;
  /** Which of `files` are conffiles (dpkg keeps them, and a removed package stays config-files). */
  conffiles?: string[];
  /** Maintainer scripts (postinst, prerm, …), each made executable. dpkg runs them as root, chrooted into its root. */
  scripts?: Record<string, string>;
  /** Relation fields, as written in a control file ("demo-legacy (<< 2.0)"). */
  relations?: Partial<Record<'depends' | 'conflicts' | 'breaks' | 'replaces' | 'provides', string>>;
  /** The first line of its Description. */
  description?: string;
  /** Its Maintainer field (default: Datum Tests). */
  maintainer?: string;
  /** gzip the control and data members (default true); false gives the same bytes on every machine. */
  compress?: boolean;
}

export interface BuiltDeb {
  file: string;
  /** Hex sha256 of the .deb. */
  sha256: string;
  sha256File: string;
  /** Its control file. */
  control: string;
}

export declare function buildDeb(options: BuildDebOptions): Promise<BuiltDeb>;
/** Writes <dir>/Packages for every .deb in `dir` and returns its path. */
export declare function writePackagesIndex(dir: string): Promise<string>;
