import { z } from 'zod';
import { NODE_ID, NODE_ID_RULES, RESOURCE_KEY, RESOURCE_KEY_RULE, ruleMessage } from '../contract/identifiers';
import type { Json } from '../contract/json';

/*
 * What every schema of src/schemas is built from: a JSON value, the primitive identifiers, and
 * `exactly`, which ties a schema to the contract type it validates.
 */

type Equals<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;

/**
 * `exactly<T>()(schema)`: the schema, when what it parses to is exactly the contract's type T (no
 * field more or less, none optional on one side only); otherwise a compile error naming T. So a
 * field added to a format and not to its schema, or the other way round, does not compile.
 */
export const exactly =
  <T>() =>
  <S extends z.ZodType<T>>(schema: S & (Equals<z.output<S>, T> extends true ? unknown : { 'parses to exactly': T })): S =>
    schema;

export const jsonValue: z.ZodType<Json> = z.lazy(() =>
  z.union([
    z.null(),
    z.boolean(),
    z.number().refine(Number.isFinite),
    z.string(),
    z.array(jsonValue),
    z.record(z.string(), jsonValue),
  ]),
);

/** A node name (the contract's isNodeId, with its messages). */
export const nodeId = z.string({ error: ruleMessage(NODE_ID_RULES.type) }).regex(NODE_ID, ruleMessage(NODE_ID_RULES.pattern));

/** A resource key (the contract's isResourceKey, with its message). */
export const resourceKey = z.string().regex(RESOURCE_KEY, ruleMessage(RESOURCE_KEY_RULE));
