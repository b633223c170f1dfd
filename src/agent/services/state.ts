import { bytes as sized, limits } from '../limits';
import { z } from 'zod';
import { readRegular, type HeldDir, isErrno, locateIn, openLocatedDir, FileTooLarge } from '../fs';

/*
 * What the agent records about a service, under <root>/.datum/services/: the state file
 * <key>.json of the instance it started, and the intent record <key>.intent.json written before
 * the spawn (see launch.ts and adopt.ts for why both exist).
 */

const serviceState = z.object({
  key: z.string(),
  pid: z.number().int().positive(),
  port: z.number().int().positive(),
  start_ticks: z.string().nullable(),
  command: z.array(z.string()),
  started_at: z.string(),
  cwd: z.string(),
  config_path: z.string(),
  log: z.string(),
  /** Put in the instance's environment at spawn; absent only in state files from before it existed. */
  nonce: z.string().min(16).optional(),
  /** Set when the instance is a systemd unit (the systemd backend); absent: the agent's own child. */
  systemd: z
    .object({ unit: z.string().min(1), manager: z.enum(['system', 'user']), invocation_id: z.string().min(1) })
    .optional(),
});
export type ServiceState = z.infer<typeof serviceState>;

export const NONCE_ENV = 'DATUM_SERVICE_NONCE';
export const stateRel = (key: string) => `.datum/services/${key}.json`;
export const intentRel = (key: string) => `.datum/services/${key}.intent.json`;

export type ServiceRecord =
  { kind: 'absent' } | { kind: 'invalid'; file: string; why: string } | { kind: 'recorded'; file: string; state: ServiceState };

/** The intent record written before a spawn: what would be recorded, and the nonce to find it by. */
export const launchIntent = z.object({
  key: z.string(),
  nonce: z.string().min(16),
  tag: z.string(),
  port: z.number().int().positive(),
  command: z.array(z.string()),
  cwd: z.string(),
  config_path: z.string(),
  started_at: z.string(),
  log: z.string(),
  /** Set when the launch goes through systemd: the unit to look for on a retry. */
  systemd: z.object({ unit: z.string().min(1), manager: z.enum(['system', 'user']) }).optional(),
});
export type LaunchIntent = z.infer<typeof launchIntent>;

/** <root>/.datum/services, held open (reached without following a symlink). */
export async function servicesDir(root: string): Promise<HeldDir> {
  const rel = stateRel('_');
  const loc = await locateIn(root, rel, 'service state path', '.datum');
  return await openLocatedDir(root, loc, rel, 'service state path');
}

/** The state file's fields an intent already fixes; the pid and its start time come from the spawn. */
export const stateOf = (intent: LaunchIntent): Omit<ServiceState, 'pid' | 'start_ticks'> => ({
  key: intent.key,
  port: intent.port,
  command: intent.command,
  started_at: intent.started_at,
  cwd: intent.cwd,
  config_path: intent.config_path,
  log: intent.log,
  nonce: intent.nonce,
});

/** A JSON document under .datum/ (really inside it, never through a symlink); null when absent. */
export async function readDatumJson(
  root: string,
  rel: string,
): Promise<{ ok: true; value: unknown } | { ok: false; why: string } | null> {
  const loc = await locateIn(root, rel, 'service state path', '.datum');
  let text: string;
  try {
    // Capped from fstat: read on every observe and every watch poll, so a huge (even sparse) file
    // here must cost nothing but the refusal.
    text = (await readRegular(loc.abs, limits.smallRecordBytes)).bytes.toString('utf8');
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return null;
    if (isErrno(err, 'ELOOP')) return { ok: false, why: 'it is a symlink, and Datum writes only regular files there' };
    if (err instanceof FileTooLarge)
      return {
        ok: false,
        why: `it holds ${sized(err.size)}, more than the ${sized(err.cap)} a service record holds, and was not read`,
      };
    throw err;
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, why: `it is not valid JSON (${(err as Error).message})` };
  }
}

/** The state file of service `key` as found, without creating anything (observe is read-only). */
export async function readServiceRecord(root: string, key: string): Promise<ServiceRecord> {
  const file = stateRel(key);
  const read = await readDatumJson(root, file);
  if (read === null) return { kind: 'absent' };
  if (!read.ok) return { kind: 'invalid', file, why: read.why };
  const parsed = serviceState.safeParse(read.value);
  if (!parsed.success)
    return {
      kind: 'invalid',
      file,
      why: parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; '),
    };
  if (parsed.data.key !== key) return { kind: 'invalid', file, why: `it is the state of "${parsed.data.key}", not of "${key}"` };
  return { kind: 'recorded', file, state: parsed.data };
}

/** The recorded state of service `key`, or null when there is none usable. */
export async function readServiceState(root: string, key: string): Promise<ServiceState | null> {
  const record = await readServiceRecord(root, key);
  return record.kind === 'recorded' ? record.state : null;
}

/** How a person finds the instance: "pid 123", or "datum-N\x2d24-app.service (pid 123)" for a unit. */
export function describeInstance(state: ServiceState): string {
  if (state.systemd === undefined) return `pid ${state.pid}`;
  return state.pid > 0 ? `${state.systemd.unit} (pid ${state.pid})` : state.systemd.unit;
}
