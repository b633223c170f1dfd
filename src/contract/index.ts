/*
 * Datum's contract: the one module the workflows, the workers, the agent, the CLI and the tests
 * share (docs/architecture.md §3 "The contract"). A leaf: it loads zod, @temporalio/common and
 * @noble/hashes and nothing else at run time (src/domain only as types), so importing it never
 * brings in the workflow sandbox. eslint.config.mjs keeps it that way.
 */
export * from './fix';
export * from './identifiers';
export * from './json';
export * from './vocabulary';
export * from './desired';
export * from './observation';
export * from './ledger';
export * from './history';
export * from './names';
export * from './workflows';
export * from './signals';
export * from './agent';
export * from './control';
export * from './failures';
export * from './metrics';
export * from './patches';
export * from './work';
export * from './removal';
export * from './trust';
export * from './fleet';
