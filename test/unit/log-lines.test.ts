import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LogLines } from '../../src/cluster/log-lines';
import { logSize, waitForLog, type ProcessRecord } from '../../src/cluster/processes';

/*
 * The cluster's readiness reader: a process's log is appended to across runs, and `up` waits for
 * the ready line written after the log's size in bytes. What an earlier run wrote holds multi-byte
 * characters (an agent's "—" is three bytes in UTF-8).
 */

let dir: string;
let log: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'datum-log-lines-'));
  log = path.join(dir, 'agent-N-21.log');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** This test's own process stands in for the agent (the unit tier starts none): alive while the reader waits. */
function standInAgent(): ProcessRecord {
  const cmdline = existsSync('/proc/self/cmdline') ? readFileSync('/proc/self/cmdline', 'utf8') : '';
  return { name: 'agent-N-21', pid: process.pid, log, command: cmdline.replace(/\0$/, '').split('\0') };
}

const EARLIER_RUN = 'datum agent: N-21 lost its server — fix: it retries\n'.repeat(4) + 'bye ✓ — ünïcödé 🚀\n';
const READY = 'datum agent: serving datum-node-N-21';

describe('the readiness reader', () => {
  it('finds the ready line written after a byte offset, with multi-byte characters before the offset', async () => {
    writeFileSync(log, EARLIER_RUN);
    const from = await logSize(log);
    expect(from).toBeGreaterThan(EARLIER_RUN.length); // the offset is in bytes, not characters
    const p = standInAgent();
    appendFileSync(log, `${READY}\n`);
    await expect(waitForLog(p, 'datum agent: serving', 2_000, from)).resolves.toBeUndefined();
    expect(new LogLines(log, from).read()).toEqual([READY]);
  });

  it('does not take a ready line from before the offset', async () => {
    writeFileSync(log, `${EARLIER_RUN}${READY}\n`);
    const from = await logSize(log);
    const error = await waitForLog(standInAgent(), 'datum agent: serving', 500, from).catch((e: Error) => e);
    expect(String(error)).toMatch(/agent-N-21 did not become ready within 0.5 s/);
  });

  it('hands back a line whose multi-byte character was split across reads only once it is whole', () => {
    writeFileSync(log, EARLIER_RUN);
    const reader = new LogLines(log, Buffer.byteLength(EARLIER_RUN));
    const line = Buffer.from('status — ok\n');
    const cut = line.indexOf(Buffer.from('—')) + 1; // inside the dash's three bytes
    appendFileSync(log, line.subarray(0, cut));
    expect(reader.read()).toEqual([]);
    appendFileSync(log, line.subarray(cut));
    expect(reader.read()).toEqual(['status — ok']);
    expect(reader.read()).toEqual([]);
    expect(reader.position).toBe(Buffer.byteLength(EARLIER_RUN) + line.length);
  });

  it('reads every line from the start, and a missing log as empty', () => {
    expect(new LogLines(log).read()).toEqual([]);
    writeFileSync(log, EARLIER_RUN);
    expect(new LogLines(log).read()).toEqual(EARLIER_RUN.trimEnd().split('\n'));
  });
});
