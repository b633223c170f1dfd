// Issue 18, hole 4: a write could lose another writer's change without trace. The agent checked
// the target's marker, then kept a backup and wrote and fsynced its temp file, then renamed: a
// change that landed in between was overwritten, with no MARKER_MOVED and no backup holding it.
// Here a separate process waits for the agent's temp file to appear beside the target (the
// agent is then past its check and before its rename) and rewrites the target in place at that
// very moment, once per write. Each of its changes must still be there afterwards, or kept under
// .datum/backup/ and reported as MARKER_MOVED.

import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { ApplicationFailure } from '@temporalio/common';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanupNodes, fileAction, makeNode, snapshot } from '../agent/helpers';

afterEach(cleanupNodes);

const ROUNDS = 30;

/**
 * Armed once per round by a line "arm <n>" on stdin (answered "armed <n>"): then waits, for up
 * to 3 s, until a temp file of the agent's appears next to `target`, and rewrites `target` in
 * place (same inode) with "racer-<n>"; says "wrote <n>", or "missed <n>" when no temp came.
 */
function inPlaceWriter(target: string): ChildProcess {
  const script = `
    const fs = require('node:fs');
    const path = require('node:path');
    const target = process.argv[1];
    const dir = path.dirname(target), prefix = '.' + path.basename(target) + '.datum-tmp-';
    const temp = () => { try { return fs.readdirSync(dir).some((n) => n.startsWith(prefix)); } catch { return false; } };
    require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
      const n = line.split(' ')[1];
      process.stdout.write('armed ' + n + '\\n');
      const until = Date.now() + 3000;
      while (!temp()) if (Date.now() > until) return void process.stdout.write('missed ' + n + '\\n');
      const fd = fs.openSync(target, fs.constants.O_WRONLY | fs.constants.O_TRUNC);
      fs.writeSync(fd, 'racer-' + n + '\\n');
      fs.closeSync(fd);
      process.stdout.write('wrote ' + n + '\\n');
    });`;
  return spawn(process.execPath, ['-e', script, target], { stdio: ['pipe', 'pipe', 'inherit'] });
}

/** The next line the racer says that starts with `word`. */
function said(racer: ChildProcess): (prefix: RegExp) => Promise<string> {
  const lines: string[] = [];
  const waiting: Array<() => void> = [];
  createInterface({ input: racer.stdout! }).on('line', (l) => {
    lines.push(l);
    waiting.splice(0).forEach((w) => w());
  });
  return async (prefix) => {
    for (;;) {
      const at = lines.findIndex((l) => prefix.test(l));
      if (at >= 0) return lines.splice(at, 1)[0];
      await new Promise<void>((r) => waiting.push(r));
    }
  };
}

/** Every backup's bytes. */
async function backups(root: string): Promise<string[]> {
  const dir = path.join(root, '.datum/backup');
  const all = await snapshot(dir).catch(() => ({}));
  const files = Object.entries(all).filter(([, kind]) => kind.startsWith('file:'));
  return await Promise.all(files.map(([rel]) => fs.readFile(path.join(dir, rel), 'utf8')));
}

describe('attack: another writer rewrites the file between the agent’s check and its rename', () => {
  it('never loses the change: it is still in the file, or kept in a backup and reported as MARKER_MOVED', async () => {
    const t = await makeNode();
    const target = path.join(t.root, 'etc/app.conf');
    await fs.mkdir(path.dirname(target));
    await fs.writeFile(target, 'initial\n');
    const racer = inPlaceWriter(target);
    const next = said(racer);
    const tally = {
      applied: 0,
      markerMoved: 0,
      missed: 0,
      keptInFile: 0,
      keptInBackupAndReported: 0,
      keptInBackupAfterTheSwap: 0,
    };
    const lost: string[] = [];
    // A megabyte per write, so that writing and fsyncing the temp file takes a while.
    const filler = 'x'.repeat(1 << 20);
    try {
      for (let i = 0; i < ROUNDS; i++) {
        racer.stdin!.write(`arm ${i}\n`);
        await next(new RegExp(`^armed ${i}$`));
        const outcome = await t.apply(fileAction(t.node, 'config', 'etc/app.conf', `datum-${i}\n${filler}`)).then(
          () => 'applied' as const,
          (err: unknown) => (err instanceof ApplicationFailure ? err.type : String(err)),
        );
        if (outcome === 'applied') tally.applied++;
        if (outcome === 'MarkerMoved') tally.markerMoved++;
        if ((await next(new RegExp(`^(wrote|missed) ${i}$`))).startsWith('missed')) {
          tally.missed++;
          continue;
        }
        const theirs = `racer-${i}\n`;
        if ((await fs.readFile(target, 'utf8')) === theirs) tally.keptInFile++;
        else if (!(await backups(t.root)).includes(theirs)) lost.push(`${theirs.trim()} (apply ${outcome})`);
        else if (outcome === 'MarkerMoved') tally.keptInBackupAndReported++;
        // Written through a descriptor it opened before the swap, after the agent's last look at the
        // replaced inode: the bytes are kept (the backup is that inode), nothing could report them.
        else tally.keptInBackupAfterTheSwap++;
      }
    } finally {
      racer.kill('SIGKILL');
    }
    console.log('in-place writer between check and rename', tally);
    expect(lost).toEqual([]);
    // The race was run: the writer hit most writes.
    expect(tally.missed, JSON.stringify(tally)).toBeLessThan(ROUNDS / 2);
  }, 300_000);
});
