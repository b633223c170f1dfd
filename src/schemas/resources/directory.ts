import { z } from 'zod';
import type { DirectorySpec } from '../../contract/desired';
import { exactly } from '../base';
import { accountField, modeField, nodePath } from './fields';

export const directorySpec = exactly<DirectorySpec>()(
  z.strictObject({
    type: z.literal('directory'),
    path: nodePath,
    mode: modeField('directory').optional(),
    owner: accountField('owner').optional(),
    group: accountField('group').optional(),
  }),
);
