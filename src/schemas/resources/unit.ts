import { z } from 'zod';
import type { UnitProbe, UnitSpec } from '../../contract/desired';
import { withFix } from '../../contract/fix';
import { parseDuration, DURATION_HINT } from '../../domain/duration';
import { unitNameProblem, unitPropertyProblem } from '../../domain/resources';
import { exactly, resourceKey } from '../base';

/*
 * A systemd unit as desired state declares it. The name is checked as strictly as the agent
 * checks it again (src/domain/resources/unit.ts unitNameProblem): systemctl would mangle a bad
 * name into another unit rather than refuse it. A probe is liveness only, so it comes with content
 * whose take-up the unit proves (content, dropin or restart_on) and with active: true.
 */

/** A unit file or drop-in as text; 1 MiB is far beyond any real one. */
const UNIT_TEXT_MAX = 1024 * 1024;
/** A probe that takes longer holds the node's observe (one minute in all) too long. */
export const PROBE_TIMEOUT_MAX_MS = 10_000;

const unitName = z.string().superRefine((name, ctx) => {
  const problem = unitNameProblem(name);
  if (problem)
    ctx.addIssue({
      code: 'custom',
      message: withFix(
        `unit name ${JSON.stringify(name)} ${problem}`,
        'write the unit name systemd knows, with its type, such as nginx.service or getty@tty1.service',
      ),
    });
});

const unitText = (field: string) =>
  z
    .string()
    .max(UNIT_TEXT_MAX, withFix(`${field} is larger than 1 MiB`, 'keep the unit file to its directives'))
    .refine((text) => !text.includes('\0'), withFix(`${field} holds a NUL byte`, 'write the unit file as text'));

const propertyValue = z.union([z.string(), z.number().int()], {
  error: withFix(
    'a property value is text or a whole number, as systemctl show prints it',
    'write it as `systemctl show -p <Name> <unit>` prints it, such as LimitNOFILE: "65536" or Restart: always',
  ),
});

const properties = z.record(z.string(), propertyValue).superRefine((props, ctx) => {
  for (const [name, value] of Object.entries(props)) {
    const problem = unitPropertyProblem(name);
    if (problem)
      ctx.addIssue({
        code: 'custom',
        path: [name],
        message: withFix(`"${name}" ${problem}`, 'declare a configuration property, such as Restart or LimitNOFILE'),
      });
    else if (typeof value === 'string' && /[\n\r\0]/.test(value))
      ctx.addIssue({
        code: 'custom',
        path: [name],
        message: withFix('a property value is one line', 'write the value as systemctl show prints it, on one line'),
      });
  }
});

const timeout = z
  .string()
  .refine(
    (t) => {
      const ms = parseDuration(t);
      return ms !== null && ms > 0 && ms <= PROBE_TIMEOUT_MAX_MS;
    },
    withFix('a probe timeout is a duration above 0 and at most 10s', DURATION_HINT),
  )
  .optional();

/**
 * An http probe asks this host's own loopback, by address (no name to resolve): the unit runs
 * here, so its answer is here, and a probe is never a way for desired state to reach other hosts.
 */
const loopbackUrl = z
  .string()
  .refine(
    (url) => /^http:\/\/(127(\.\d{1,3}){3}|\[::1\])(:\d{1,5})?(\/[^\s#]*)?$/.test(url),
    withFix(
      'a probe asks only this host over plain http, by loopback address',
      'write http://127.0.0.1:<port>/<path> (or http://[::1]:<port>/<path>)',
    ),
  );

export const unitProbe = exactly<UnitProbe>()(
  z.union(
    [
      z.strictObject({
        http: z.strictObject({
          url: loopbackUrl,
          status: z.number().int().min(100).max(599).optional(),
          body: z.string().max(4096).optional(),
        }),
        timeout,
      }),
      z.strictObject({
        command: z
          .array(z.string().min(1))
          .min(1)
          .refine(
            (argv) => argv[0].startsWith('/'),
            withFix('a probe command names its program by absolute path', 'write the full path, such as /usr/bin/redis-cli'),
          ),
        output: z.string().max(4096).optional(),
        timeout,
      }),
    ],
    {
      error: withFix(
        'a probe is { http: { url, status?, body? } } or { command: [argv], output? }',
        'write probe: { http: { url: "http://127.0.0.1:8080/health", status: 200 } }',
      ),
    },
  ),
);

export const unitSpec = exactly<UnitSpec>()(
  z
    .strictObject({
      type: z.literal('unit'),
      name: unitName,
      content: unitText('content').optional(),
      dropin: unitText('dropin').optional(),
      enabled: z
        .literal(true, {
          error: withFix('enabled is only ever true', 'leave enabled out; disabling a unit is never a repair'),
        })
        .optional(),
      active: z
        .literal(true, { error: withFix('active is only ever true', 'leave active out; stopping a unit is never a repair') })
        .optional(),
      properties: properties.optional(),
      restart_on: z.array(resourceKey).min(1).optional(),
      probe: unitProbe.optional(),
    })
    .superRefine((spec, ctx) => {
      const issue = (path: string, problem: string, fix: string) =>
        ctx.addIssue({ code: 'custom', path: [path], message: withFix(problem, fix) });
      if (spec.content !== undefined && spec.dropin !== undefined)
        issue('dropin', 'content and dropin are both given', 'give the whole unit file as content, or a drop-in, not both');
      if (spec.restart_on !== undefined && spec.active !== true)
        issue('restart_on', 'restart_on is for a unit that runs', 'add active: true, or leave restart_on out');
      if (spec.probe !== undefined && spec.active !== true)
        issue('probe', 'a probe asks a unit that runs', 'add active: true, or leave the probe out');
      if (spec.probe !== undefined && spec.content === undefined && spec.dropin === undefined && spec.restart_on === undefined)
        issue(
          'probe',
          'a probe only shows that the unit answers, and there is no content whose take-up could make it converged',
          'declare the content the unit loads (content, dropin or restart_on), or leave the probe out and declare active: true',
        );
      if (new Set(spec.restart_on ?? []).size !== (spec.restart_on ?? []).length)
        issue('restart_on', 'restart_on names a file twice', 'name each file resource once');
    }),
);
