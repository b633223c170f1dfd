import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Json } from '../../domain';
import { isRunning } from './identity';
import type { ServiceState } from './state';

export type Health = { ok: true; status: number; body: Json } | { ok: false; error: string };

/** GET http://127.0.0.1:<port>/health: the service's own account of what it runs. */
export async function probeHealth(port: number, timeoutMs: number): Promise<Health> {
  return await new Promise<Health>((resolve) => {
    const req = http.get(
      {
        host: '127.0.0.1',
        port,
        path: '/health',
        agent: false,
        signal: AbortSignal.timeout(timeoutMs),
        headers: { accept: 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size <= 65536) chunks.push(chunk);
        });
        res.on('error', (err) => resolve({ ok: false, error: err.message }));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status !== 200) return resolve({ ok: false, error: `answered HTTP ${status}` });
          try {
            resolve({ ok: true, status, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json });
          } catch (err) {
            resolve({ ok: false, error: `answered something that is not JSON (${(err as Error).message})` });
          }
        });
      },
    );
    req.on('error', (err) =>
      resolve({
        ok: false,
        error: err.name === 'AbortError' || err.name === 'TimeoutError' ? `did not answer within ${timeoutMs} ms` : err.message,
      }),
    );
  });
}

/** Polls /health until it answers, the process dies, or `ms` pass. */
export async function waitHealthy(state: ServiceState, ms: number): Promise<Health & { exited?: boolean }> {
  const deadline = Date.now() + ms;
  let last: Health = { ok: false, error: 'was not asked' };
  for (;;) {
    if (!(await isRunning(state))) return { ok: false, error: `the process exited (see ${state.log})`, exited: true };
    last = await probeHealth(state.port, Math.max(250, Math.min(2000, deadline - Date.now())));
    if (last.ok || Date.now() >= deadline) return last;
    await sleep(150);
  }
}
