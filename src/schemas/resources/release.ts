import { z } from 'zod';
import type { ReleaseSpec } from '../../contract/desired';
import { withFix } from '../../contract/fix';
import { exactly } from '../base';
import { VERSION, artifactRef, sha256Field } from './fields';

export const releaseSpec = exactly<ReleaseSpec>()(
  z.strictObject({
    type: z.literal('release'),
    version: z
      .string()
      .regex(VERSION, withFix('is not a usable release version', 'use letters, digits, ".", "_", "+" or "-", such as "7.4"')),
    artifact: artifactRef,
    sha256: sha256Field,
  }),
);
