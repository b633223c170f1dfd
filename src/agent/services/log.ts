import { OPEN_FLAGS, atomicWriteAt, isSoleRegular, type HeldDir, isErrno } from '../fs';
import { limits } from '../limits';
import { servicesDir } from './state';

/**
 * Keeps a service log under MAX_SERVICE_LOG_BYTES: past it, its last MAX_SERVICE_LOG_BYTES go
 * to <log>.1 (replacing the previous one) and the log is truncated. The service writes with
 * O_APPEND, so it simply continues at the new end.
 */
export async function rotateLog(dir: HeldDir, logName: string): Promise<void> {
  let handle;
  try {
    handle = await dir.open(logName, OPEN_FLAGS.readWrite);
  } catch (err) {
    if (isErrno(err, 'ENOENT') || isErrno(err, 'ELOOP')) return; // nothing to rotate; a symlink is refused on open
    throw err;
  }
  try {
    if (!(await isSoleRegular(handle))) {
      // A hard link to a file elsewhere, or no regular file: truncating it would cut someone
      // else's file. Only this name goes; the next start opens a fresh log.
      await dir.remove(logName);
      return;
    }
    const { size } = await handle.stat();
    if (size <= limits.serviceLogBytes) return;
    const tail = Buffer.alloc(limits.serviceLogBytes);
    const { bytesRead } = await handle.read(tail, 0, tail.length, size - tail.length);
    await atomicWriteAt(dir, `${logName}.1`, tail.subarray(0, bytesRead));
    await handle.truncate(0);
  } finally {
    await handle.close();
  }
}

/** Rotates service `key`'s log if it outgrew its cap (observe calls this: the log is Datum's own). */
export async function capServiceLog(root: string, key: string): Promise<void> {
  const dir = await servicesDir(root);
  try {
    await rotateLog(dir, `${key}.log`);
  } finally {
    await dir.close();
  }
}
