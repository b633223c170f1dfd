import { z } from 'zod';
import { withFix } from '../contract/fix';
import { DESIRED_DIGEST } from '../contract/identifiers';
import type { RecheckPayload, RefreshDesiredPayload, ResolveConflictPayload, SignalName } from '../contract/signals';
import { RESOLUTIONS } from '../contract/vocabulary';
import { OPERATOR_SIGNATURE_FIX, operatorSignatureProblem, type OperatorSignature } from '../contract/trust';
import { exactly, resourceKey } from './base';

/*
 * The signal payloads as zod schemas, for code at the edges that reads a payload with the other
 * formats. The workflow and the CLI judge payloads with the contract's SIGNAL_CHECKS, which load
 * no zod; test/unit/guards.test.ts keeps each check in agreement with its schema here on generated
 * payloads, valid and invalid, so the two say the same about what is valid.
 */

const operatorSignature = z
  .unknown()
  .superRefine((value, ctx) => {
    const problem = operatorSignatureProblem(value);
    if (problem) ctx.addIssue({ code: 'custom', message: withFix(problem, OPERATOR_SIGNATURE_FIX) });
  })
  .transform((value) => value as OperatorSignature);

export const refreshDesiredPayload = exactly<RefreshDesiredPayload>()(
  z.strictObject({
    generation: z
      .number({ error: withFix('must be a whole number', 'send {"generation": <G>, "digest": "sha256:…"}') })
      .int()
      .min(1),
    digest: z
      .string({
        error: withFix('is missing', 'send the desired_digest the authority shows for that generation (datum refresh does this)'),
      })
      .regex(
        DESIRED_DIGEST,
        withFix(
          'must look like "sha256:<64 hex digits>"',
          'copy desired_digest from `datum describe` or let `datum refresh` send it',
        ),
      ),
  }),
);

export const resolveConflictPayload = exactly<ResolveConflictPayload>()(
  z.strictObject({
    resource_key: resourceKey,
    resolution: z.enum(RESOLUTIONS, {
      error: withFix(
        'must be "retake" or "yield"',
        'retake to let Datum own the resource again, yield to leave it to the other writer',
      ),
    }),
    by: z
      .string({ error: withFix('is missing', 'say who resolves the conflict, such as "oncall"') })
      .min(1, withFix('is empty', 'say who resolves the conflict')),
    note: z.string().nullable().optional(),
    operator: operatorSignature.nullable().optional(),
  }),
);

export const recheckPayload = exactly<RecheckPayload>()(z.union([z.strictObject({}), z.null(), z.undefined()]));

/** Each signal's schema, by name. */
export const SIGNAL_SCHEMAS = {
  refreshDesired: refreshDesiredPayload,
  resolveConflict: resolveConflictPayload,
  recheck: recheckPayload,
} as const satisfies Record<SignalName, z.ZodType>;
