// Types for scripts/build.mjs, so TypeScript can import it.
export declare function build(options?: { force?: boolean }): string;
