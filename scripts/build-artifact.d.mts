// Types for scripts/build-artifact.mjs, so TypeScript tests can import it.
export declare const DEMO_APP_DIR: string;
export interface BuildArtifactOptions {
  version: string;
  /** Directory for app-<version>.tgz and its .sha256 (default: the working directory). */
  outDir?: string;
  /** Build string baked into build.json instead of the version (probe 4). */
  reportBuild?: string;
  /** Directory holding server.js (default: examples/demo-app). */
  sourceDir?: string;
}
export declare function buildArtifact(
  options: BuildArtifactOptions,
): Promise<{ file: string; sha256: string; sha256File: string }>;
