import { z } from 'zod';
import { withFix } from '../contract/fix';

/*
 * agent.yaml's `services`: how the agent runs the services it manages. `process` (the default)
 * spawns each one as the agent's own detached child; `systemd` hands it to the service manager as
 * a transient unit (src/agent/services/systemd.ts says why a service and not a scope).
 */

export const SERVICE_BACKENDS = ['process', 'systemd'] as const;

/**
 * Properties Datum sets itself, or that would break what it relies on: the command, its directory,
 * environment, log and user come from the service resource and services.systemd.user; the main
 * process must stay the one systemd-run started; and restarting is the loop's job, so that every
 * restart is a recorded decision.
 */
export const RESERVED_UNIT_PROPERTIES = [
  'Type',
  'ExecStart',
  'ExecStartPre',
  'ExecStartPost',
  'ExecCondition',
  'ExecReload',
  'ExecStop',
  'ExecStopPost',
  'PIDFile',
  'WorkingDirectory',
  'RootDirectory',
  'Environment',
  'EnvironmentFile',
  'PassEnvironment',
  'UnsetEnvironment',
  'StandardInput',
  'StandardOutput',
  'StandardError',
  'User',
  'DynamicUser',
  'Restart',
  'RemainAfterExit',
  'CollectMode',
] as const;

const UNIT_PROPERTY = /^[A-Z][A-Za-z0-9]{0,63}$/;
// A user name as useradd accepts it (a trailing $ for machine accounts), or a numeric uid.
const USER = /^(?:[A-Za-z_][A-Za-z0-9_.-]{0,30}\$?|\d{1,10})$/;

const unitPropertyName = z.string().superRefine((name, ctx) => {
  if (!UNIT_PROPERTY.test(name))
    ctx.addIssue({
      code: 'custom',
      message: withFix(
        `"${name}" is not a unit property name`,
        'write a property of systemd.exec(5), systemd.kill(5) or systemd.resource-control(5), such as MemoryMax or CPUQuota',
      ),
    });
  else if ((RESERVED_UNIT_PROPERTIES as readonly string[]).includes(name))
    ctx.addIssue({
      code: 'custom',
      message: withFix(
        `${name} is set by Datum itself (the command, directory, environment, log and user come from the service resource and services.systemd.user; restarts are the loop's)`,
        `remove ${name}`,
      ),
    });
});

const unitPropertyValue = z
  .union([z.string(), z.number(), z.boolean()], {
    error: withFix(
      'a unit property value must be a string, a number or a boolean',
      'write it as you would in a unit file, e.g. MemoryMax: 512M',
    ),
  })
  .refine((v) => !/[\n\r\0]/.test(String(v)), withFix('a unit property value must be one line', 'remove the line break'));

export const systemdServices = z
  .strictObject({
    manager: z
      .enum(['system', 'user'], {
        error: withFix(
          'manager must be system or user',
          "write manager: system (the host's service manager) or manager: user (the agent user's own)",
        ),
      })
      .default('system'),
    user: z
      .string()
      .regex(USER, withFix('is not a user name or uid', 'give the user the services run as, such as datum-app, or leave it out'))
      .optional(),
    properties: z
      .record(unitPropertyName, unitPropertyValue, {
        error: withFix('properties must be a mapping of unit properties to values', 'write properties: { MemoryMax: 512M }'),
      })
      .default({}),
  })
  .superRefine((s, ctx) => {
    if (s.manager === 'user' && s.user !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['user'],
        message: withFix(
          'a user manager runs everything as its own user',
          'remove user, or use manager: system to run the services as another user',
        ),
      });
  });

export const agentServices = z
  .strictObject({
    backend: z
      .enum(SERVICE_BACKENDS, {
        error: withFix(
          'backend must be process or systemd',
          "write backend: process (the agent's own children, the default) or backend: systemd (transient systemd units)",
        ),
      })
      .default('process'),
    systemd: systemdServices.default({ manager: 'system', properties: {} }),
  })
  .default({ backend: 'process', systemd: { manager: 'system', properties: {} } });
