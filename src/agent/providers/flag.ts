import { z } from 'zod';
import path from 'node:path';
import type { FlagSpec, Json, Observation, ObservedResource } from '../../domain';
import { ABSENT_MARKER, fileMarker } from '../markers';
import { pathStamp, lstatAt, inLocatedDir, locateIn, readLocated } from '../fs';
import { bytes as sized, limits } from '../limits';
import { withFix } from '../../contract';
import { AgentRefusal } from '../refusal';
import { observeRegularFile, writeReplacing, type ReadFile } from './file';
import { now, observeGuarded, specOf, type ApplyResult, type AtWrite, type NodeContext, type Provider } from './types';

/*
 * flag: the JSON document at <root>/flags/<name>.json (null when absent). Writing one keeps the
 * previous document under .datum/backup/ like a file's; deleting one is destructive, done only by
 * an approved planned removal (src/agent/activities/removal.ts), never by a repair.
 */

export const flagWriteSpec = z.strictObject({ name: z.string(), value: z.json() });

const FLAG_NAME = /^[A-Za-z][A-Za-z0-9_-]{0,62}$/;
const flagRel = (name: string) => `flags/${name}.json`;

export const flagProvider: Provider<FlagSpec> = {
  actions: ['flag.write'],
  destructive: ['flag.delete'],
  observe: (ctx, key) => observeFlag(ctx, key),
  apply: (ctx, action, atWrite) => applyFlagWrite(ctx, action.resource_key, specOf(action, flagWriteSpec), now, atWrite),
  targetNow: (ctx, action) => observeFlag(ctx, action.resource_key),
  watch: {
    marker: (root, key) => pathStamp(path.join(root, flagRel(key))),
    dirs: (root) => [path.join(root, 'flags')],
  },
  importSpec: async (ctx, _key, name) => {
    if (!FLAG_NAME.test(name))
      return { problem: withFix(`"${name}" is not a flag name`, 'name a flag by its file under flags/, without .json') };
    const seen = await observeFlag(ctx, name);
    if (seen.obstruction !== null) return { problem: seen.obstruction };
    if (seen.value === null) {
      const parseError = seen.detail.parse_error;
      return { problem: `flags/${name}.json ${typeof parseError === 'string' ? `is ${parseError}` : 'is absent'}` };
    }
    return { spec: { type: 'flag', value: seen.value } };
  },
};

function parseFlag({ bytes }: ReadFile): { ok: true; value: Json } | { ok: false; error: string } {
  if (bytes === null || bytes.length > limits.flagBytes)
    return { ok: false, error: `larger than the ${sized(limits.flagBytes)} a flag holds (MAX_FLAG_BYTES)` };
  try {
    return { ok: true, value: JSON.parse(bytes.toString('utf8')) as Json };
  } catch (err) {
    return { ok: false, error: `not valid JSON: ${(err as Error).message}` };
  }
}

export async function observeFlag(ctx: NodeContext, name: string): Promise<ObservedResource> {
  const rel = flagRel(name);
  return await observeGuarded('flag', { path: rel }, () => observeFlagAt(ctx, rel));
}

async function observeFlagAt(ctx: NodeContext, rel: string): Promise<ObservedResource> {
  try {
    const loc = await locateIn(ctx.root, rel, 'flag path', 'flags');
    const seen = await readLocated(ctx.root, loc, rel, 'flag path', (entry) =>
      observeRegularFile('flag', entry, { path: rel }, parseFlag),
    );
    return seen ?? { type: 'flag', value: null, marker: ABSENT_MARKER, obstruction: null, detail: { path: rel, kind: 'absent' } };
  } catch (err) {
    if (err instanceof AgentRefusal)
      return { type: 'flag', value: null, marker: null, obstruction: err.message, detail: { path: rel, refusal: err.type } };
    throw err;
  }
}

/** Every flags/*.json whose name is not one of `declared`: what the node holds beyond desired state. */
export async function undeclaredFlags(ctx: NodeContext, declared: Set<string>): Promise<Observation['undeclared']> {
  const rel = flagRel('_');
  let loc;
  try {
    loc = await locateIn(ctx.root, rel, 'flag path', 'flags');
  } catch (err) {
    if (err instanceof AgentRefusal) return []; // flags/ itself is obstructed; each declared flag reports it
    throw err;
  }
  const out: Observation['undeclared'] = [];
  await inLocatedDir(ctx.root, loc, rel, 'flag path', async (dir) => {
    for (const file of (await dir.entries()).sort()) {
      if (!file.endsWith('.json') || file.startsWith('.')) continue;
      const key = file.slice(0, -'.json'.length);
      if (declared.has(key)) continue;
      const st = await lstatAt(dir, file);
      if (st === null) continue; // removed while listing
      const seen = st.isFile() ? await observeRegularFile('flag', dir.at(file), { path: flagRel(key) }, parseFlag) : null;
      out.push({ resource_key: key, type: 'flag', value: seen?.value ?? null, marker: seen?.marker ?? fileMarker(st) });
    }
  }).catch((err: unknown) => {
    // flags/ reshaped while listing (a refusal, or an entry gone between two looks): the list is
    // what the observation adds beyond desired state, and the next pass lists it again.
    if (!(err instanceof AgentRefusal) && typeof (err as NodeJS.ErrnoException).code !== 'string') throw err;
  });
  return out;
}

export async function applyFlagWrite(
  ctx: NodeContext,
  resourceKey: string,
  spec: z.infer<typeof flagWriteSpec>,
  now: () => Date,
  atWrite: AtWrite,
): Promise<ApplyResult> {
  if (spec.name.includes('/') || spec.name.includes('\\') || spec.name.includes('..')) {
    throw new AgentRefusal(
      'PathOutsideRoot',
      withFix(
        `flag name "${spec.name}" would put the flag outside flags/`,
        'name flags after their resource key (letters, digits, "_", "-")',
      ),
      { name: spec.name },
    );
  }
  if (!FLAG_NAME.test(spec.name) || spec.name !== resourceKey) {
    throw new AgentRefusal(
      'InvalidAction',
      withFix(
        `flag.write names flag "${spec.name}" but the action is for resource "${resourceKey}"`,
        'a flag is stored under its own resource key; re-plan from the desired state',
      ),
      { name: spec.name },
    );
  }
  const rel = flagRel(spec.name);
  const document = `${JSON.stringify(spec.value)}\n`;
  const size = Buffer.byteLength(document);
  if (size > limits.flagBytes) {
    throw new AgentRefusal(
      'SizeLimitExceeded',
      withFix(
        `flag "${spec.name}" would be a ${sized(size)} document, more than the ${sized(limits.flagBytes)} a flag may hold (MAX_FLAG_BYTES)`,
        'keep flags to small switches and settings; put larger configuration in a file resource',
      ),
      { size, cap: limits.flagBytes },
    );
  }
  const { previous, st, sha256 } = await writeReplacing(ctx, 'flag', rel, document, now, atWrite);
  const before = previous ? `, replacing the previous document (kept at .datum/backup/${previous.backup})` : '';
  return {
    marker_after: fileMarker(st, sha256),
    detail: `set flag ${spec.name} to ${JSON.stringify(spec.value)} in ${rel}${before}.`,
  };
}
