import { z } from 'zod';
import type { FileSpec } from '../../contract/desired';
import { withFix } from '../../contract/fix';
import { exactly, jsonValue } from '../base';
import { accountField, modeField, nodePath } from './fields';

export const fileSpec = exactly<FileSpec>()(
  z.strictObject({
    type: z.literal('file'),
    path: nodePath,
    /**
     * The content is a secret: the ledger and the CLI show only its digest and size (as for every
     * file) and say so. Optional and never defaulted, so existing digests do not change.
     */
    sensitive: z.boolean().optional(),
    mode: modeField('file').optional(),
    owner: accountField('owner').optional(),
    group: accountField('group').optional(),
    content: z.union([z.string(), z.record(z.string(), jsonValue), z.array(jsonValue)], {
      error: withFix(
        'content must be text or a JSON/YAML object',
        'write the file body as a string, or as a mapping that Datum writes as JSON',
      ),
    }),
  }),
);
