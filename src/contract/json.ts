/** A JSON value as it crosses every boundary (workflow history, ledger, agent). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * `A` with the fields of `B` added, as one object type: what a schema's `.extend()` parses to, so
 * the format and its schema can be checked to be exactly alike (src/schemas/base.ts `exactly`).
 */
export type Extend<A, B> = { [K in keyof (A & B)]: (A & B)[K] };
