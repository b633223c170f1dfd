// Types for scripts/ci.cjs, so TypeScript can import it.
export declare function isCI(env?: NodeJS.ProcessEnv): boolean;
