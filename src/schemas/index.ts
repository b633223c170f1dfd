/*
 * Datum's formats as zod schemas, for the edges that read them from outside: the authority reader
 * (desired state), the agent (agent.yaml, the actions it is sent, the snapshot and evidence it
 * answers), the ledger store, the CLI, and the JSON Schemas of schemas/ (src/cli/schemas.ts). Each
 * schema parses to exactly its contract type (src/contract). The workflow sandbox never loads this
 * (eslint.config.mjs): it judges what it reads with the contract's small checks instead, and
 * test/unit/guards.test.ts keeps the checks in agreement with these schemas.
 *
 * A new field of a format goes in three places: its type in src/contract, its schema here, and,
 * if the workflow reads it from outside (a signal's payload, a workflow's input), its check in
 * the contract next to the type.
 */
export * from './base';
export * from './problems';
export * from './desired';
export * from './agent-services';
export * from './agent-reach';
export * from './observation';
export * from './ledger';
export * from './signals';
export * from './documents';
