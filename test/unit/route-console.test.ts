import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, routeConsole } from '../../src/worker/logging';

describe("a Datum process's console", () => {
  it('writes console.warn and console.error as JSON lines of its logger, and can be put back', () => {
    const out = new PassThrough();
    const lines: string[] = [];
    out.on('data', (d: Buffer) => lines.push(...d.toString('utf8').split('\n').filter(Boolean)));
    const restore = routeConsole(createLogger({ component: 'worker', format: 'json', level: 'info', destination: out }));
    const before = { warn: console.warn, error: console.error };
    try {
      console.warn('ledger: an idle connection to %s failed (%s)', 'postgres://db/datum', 'terminated');
      console.error(new Error('boom'));
    } finally {
      restore();
    }
    expect(console.warn).not.toBe(before.warn);
    const [warn, error] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(warn).toMatchObject({
      level: 'warn',
      component: 'worker',
      source: 'console',
      msg: 'ledger: an idle connection to postgres://db/datum failed (terminated)',
    });
    expect(error).toMatchObject({ level: 'error', source: 'console' });
    expect(String(error.msg)).toMatch(/^Error: boom/);
  });
});
