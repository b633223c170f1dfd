import { z } from 'zod';
import type { FlagSpec } from '../../contract/desired';
import { withFix } from '../../contract/fix';
import { exactly, jsonValue } from '../base';

export const flagSpec = exactly<FlagSpec>()(
  z.strictObject({
    type: z.literal('flag'),
    // null is how an absent flag is observed, so it cannot also be a desired value.
    value: jsonValue.refine(
      (v): boolean => v !== null,
      withFix('a flag value cannot be null', 'write false, 0, "" or another JSON value, or remove the resource'),
    ),
  }),
);
