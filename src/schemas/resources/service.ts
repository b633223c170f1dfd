import { z } from 'zod';
import type { ServiceSpec } from '../../contract/desired';
import { withFix } from '../../contract/fix';
import { exactly, resourceKey } from '../base';

export const serviceSpec = exactly<ServiceSpec>()(
  z.strictObject({
    type: z.literal('service'),
    release: resourceKey,
    config: resourceKey,
    command: z
      .array(z.string().min(1))
      .min(1, withFix('command is empty', 'give the program and its arguments, such as ["node", "server.js"]')),
  }),
);
