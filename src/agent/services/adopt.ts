import path from 'node:path';
import { atomicWriteAt, readdirOrEmpty } from '../fs';
import { procStat, procText, startTicks, verifyIdentity } from './identity';
import {
  NONCE_ENV,
  intentRel,
  launchIntent,
  readDatumJson,
  servicesDir,
  stateOf,
  type LaunchIntent,
  type ServiceState,
} from './state';
import { judgeUnit, showUnit } from './systemd';

/**
 * After an agent was killed between spawning service `key` and recording it: finds the live
 * process carrying the intent's nonce, and records it as the service (if it proves to be ours)
 * so the retry adopts it instead of starting a second instance. The intent is removed either
 * way. Returns the adopted state and the tag of the launch it came from, or null.
 */
export async function adoptInterrupted(root: string, key: string): Promise<{ state: ServiceState; tag: string } | null> {
  const read = await readDatumJson(root, intentRel(key));
  if (read === null) return null;
  const dir = await servicesDir(root);
  try {
    const parsed = read.ok ? launchIntent.safeParse(read.value) : null;
    let adopted: { state: ServiceState; tag: string } | null = null;
    const found = parsed?.success ? await findLaunched(parsed.data) : null;
    if (parsed?.success && found !== null) {
      const { pid, systemd } = found;
      const state: ServiceState = {
        ...stateOf(parsed.data),
        pid,
        start_ticks: await startTicks(pid),
        ...(systemd ? { systemd } : {}),
      };
      if (state.key === key && (await verifyIdentity(root, state)).kind === 'ours') {
        await atomicWriteAt(dir, `${key}.json`, `${JSON.stringify(state, null, 2)}\n`);
        adopted = { state, tag: parsed.data.tag };
      }
    }
    await dir.remove(path.basename(intentRel(key)));
    return adopted;
  } finally {
    await dir.close();
  }
}

/** The instance an interrupted launch started: its unit's main pid (systemd), or the process carrying the nonce. */
async function findLaunched(intent: LaunchIntent): Promise<{ pid: number; systemd?: ServiceState['systemd'] } | null> {
  if (intent.systemd === undefined) {
    const pid = await findByNonce(intent.nonce);
    return pid === null ? null : { pid };
  }
  // systemctl failing throws: the intent stays for the next attempt, which must not start a second unit.
  const show = await showUnit(intent.systemd.manager, intent.systemd.unit);
  const pid = Number(show.MainPID ?? 0);
  const invocation = show.InvocationID;
  if (pid <= 1 || !invocation) return null;
  // judgeUnit then verifyIdentity check the rest (loaded, live, the nonce) against what is recorded.
  const judged = judgeUnit(show, {
    unit: intent.systemd.unit,
    pid,
    invocation_id: invocation,
    nonce: `${NONCE_ENV}=${intent.nonce}`,
  });
  return judged.kind === 'ours' ? { pid, systemd: { ...intent.systemd, invocation_id: invocation } } : null;
}

/** The group leader whose environment carries DATUM_SERVICE_NONCE=<nonce>, or null. */
async function findByNonce(nonce: string): Promise<number | null> {
  const needle = `${NONCE_ENV}=${nonce}`;
  for (const name of await readdirOrEmpty('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const environ = await procText(pid, 'environ');
    if (typeof environ !== 'string' || !environ.split('\0').includes(needle)) continue;
    // Its children inherit the nonce; the instance itself leads its own process group.
    if ((await procStat(pid))?.pgrp === pid) return pid;
  }
  return null;
}
