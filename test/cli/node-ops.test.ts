import { spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { useStack } from '../helpers/stack';
import { until } from '../helpers/until';
import { useChildren } from '../helpers/processes';
import { DATUM, runDatum } from '../helpers/cli';

/*
 * What operators reach for first (issue 32), run as a person runs them against a real stack (dev
 * server, controller worker, an agent on a temp node root): `datum hold` stops repairs while the
 * loop goes on observing and reporting, `datum unhold` brings the repair, `datum reconcile --wait`
 * runs a pass now and says what it recorded, and `datum ledger --follow` and `datum status --watch`
 * print what happens as it happens, until Ctrl-C.
 */

const stack = useStack();
const children = useChildren();

const ENV = () => ({ TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: undefined, DATUM_DATA: stack.fleet.dir });
const datum = (...args: string[]) => runDatum(args, ENV());

/** A `datum` that runs until it is stopped, its output collected as it comes. */
function follow(children: ChildProcess[], ...args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, ...ENV() };
  delete env.DATUM_FLEET;
  const child = spawn(process.execPath, [DATUM, ...args], { env });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    out: () => out,
    err: () => err,
    /** Ctrl-C, and the exit code it ends with. */
    stop: async () => {
      child.kill('SIGINT');
      return exited;
    },
  };
}

describe('datum hold, unhold, reconcile --wait, ledger --follow and status --watch', () => {
  it("a held node's drift is reported, not repaired, on every entry by whom; the hold's end brings the repair", async () => {
    const node = 'H-1';
    // A change within conflict_window of Datum's own repair is another writer's (CONFLICT): this
    // edit comes seconds after the first repair, and is meant as drift.
    await stack.fleet.writeDesired(node, 1, { policy: { conflict_window: '1s' } });
    await stack.fleet.writeAgent(node);
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    const file = path.join(stack.fleet.root(node), 'etc/app/config.json');
    const desired = await fs.readFile(file, 'utf8');
    expect(desired).toBe(fileBytes({ workers: 8 }));

    // Bad input says what is wrong and sends nothing.
    const noReason = await datum('hold', node, '--by', 'oncall');
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toMatch(/reason .* must be text of 1 to 2000 characters — fix: say why/);
    const past = await datum('hold', node, '--by', 'oncall', '--reason', 'x', '--until', '2020-01-01T00:00:00Z');
    expect(past.code).toBe(2);
    expect(past.stderr).toMatch(/has passed already/);
    const notHeld = await datum('unhold', node, '--by', 'oncall');
    expect(notHeld.code).toBe(1);
    expect(notHeld.stdout + notHeld.stderr).toMatch(/H-1 is not held/);

    const ledger = follow(children, 'ledger', node, '--follow', '-o', 'jsonl');
    const watch = follow(children, 'status', '--watch', '--interval', '1s');
    await until(() => ledger.out() + watch.out(), {
      what: 'ledger --follow and status --watch to start',
      accept: (o) => o.includes('"seq"') && o.includes('Watching every 1s'),
      timeoutMs: 60_000,
      context: () => `ledger: ${ledger.err()}\nstatus: ${watch.out()}${watch.err()}`,
    });

    const held = await datum('hold', node, '--by', 'oncall', '--reason', 'disk swap CHG-1234', '--until', '2h');
    expect(held.code, held.stderr).toBe(0);
    expect(held.stdout).toMatch(/^H-1: HOLD_PLACED: oncall held H-1 until \S+ \(disk swap CHG-1234\): repairs stop/m);

    // Someone edits the managed file: the loop sees it, reports the plan, and leaves the file.
    await fs.writeFile(file, fileBytes({ workers: 3 }));
    const state = await stack.waitFor(handle, (s) => s.reason === 'HELD');
    expect(state.convergence_status).toBe('DRIFTED');
    expect(state.conditions.map((c) => `${c.type}/${c.resource_key}`)).toContain('DRIFT_HELD/config');
    await new Promise((r) => setTimeout(r, 3000));
    expect(await fs.readFile(file, 'utf8')).toBe(fileBytes({ workers: 3 }));
    const status = await datum('status', '--condition', 'DRIFT_HELD');
    expect(status.code).toBe(1);
    expect(status.stdout).toMatch(
      /H-1\s+DRIFT_HELD\s+config\s+.*held by oncall until \S+ \(disk swap CHG-1234\): reported, not repaired — fix: `datum unhold H-1/,
    );
    const whileHeld = (await stack.ledger(handle)).filter((e) => e.reason === 'HOLD_PLACED' || e.reason === 'HELD');
    expect(whileHeld.length).toBeGreaterThanOrEqual(2);
    for (const e of whileHeld) expect(e.hold).toMatchObject({ by: 'oncall', reason: 'disk swap CHG-1234' });
    expect(whileHeld.find((e) => e.reason === 'HELD')?.authorized_actions).toEqual([]);

    const lifted = await datum('unhold', node, '--by', 'oncall', '--note', 'disk swapped');
    expect(lifted.code, lifted.stderr).toBe(0);
    expect(lifted.stdout).toMatch(/^H-1: HOLD_LIFTED: oncall ended the hold/m);
    await until(() => fs.readFile(file, 'utf8'), {
      what: 'the repair after the hold',
      accept: (t) => t === desired,
      timeoutMs: 60_000,
    });
    const repaired = await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    expect(repaired.conditions).toEqual([]);

    // What the followers printed as it happened.
    const printed = () =>
      ledger
        .out()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as LedgerEntry);
    const entries = await until(printed, {
      what: 'ledger --follow to print the repair after the hold',
      accept: (es) => es.some((e) => e.reason === 'HOLD_LIFTED') && es[es.length - 1].reason === 'CONVERGED_AFTER_REPAIR',
      timeoutMs: 30_000,
      context: () =>
        `printed: ${printed()
          .map((e) => `#${e.seq} ${e.reason}`)
          .join(', ')}\nstderr: ${ledger.err()}`,
    });
    // The entries written while it ran, in the order they were written, each once.
    const reasons = entries.map((e) => e.reason).slice(entries.findIndex((e) => e.reason === 'HOLD_PLACED'));
    expect(reasons[0]).toBe('HOLD_PLACED');
    expect(reasons).toContain('HELD');
    expect(reasons.indexOf('HELD')).toBeLessThan(reasons.indexOf('HOLD_LIFTED'));
    expect(reasons[reasons.length - 1]).toBe('CONVERGED_AFTER_REPAIR');
    for (const e of entries.filter((x) => x.reason === 'HELD' || x.reason === 'HOLD_PLACED')) expect(e.hold?.by).toBe('oncall');
    expect(new Set(entries.map((e) => e.seq)).size).toBe(entries.length);
    const watched = await until(() => watch.out(), {
      what: 'status --watch to see DRIFT_HELD open and close',
      accept: (o) => /CLOSED\s+H-1 DRIFT_HELD config/.test(o),
      timeoutMs: 30_000,
    });
    expect(watched).toMatch(/OPENED\s+H-1 DRIFT_HELD config: "config" differs from desired and H-1 is held by oncall/);
    expect(await ledger.stop()).toBe(0);
    expect(await watch.stop()).not.toBeNull();

    // reconcile --wait: a pass now, and what it recorded (a steady pass writes no entry, and says so).
    const pass = await datum('reconcile', node, '--wait');
    expect(pass.code, pass.stderr).toBe(0);
    expect(pass.stdout).toMatch(/^H-1: CONVERGED\/\w+/m);
    const after = await stack.state(handle);
    expect(after.passes?.done).toBeGreaterThan(repaired.passes?.done ?? 0);
    const none = await datum('reconcile', 'NOPE-1', '--wait');
    expect(none.code).toBe(1);
    expect(none.stdout).toMatch(/NOPE-1: no reconcile loop is running for node NOPE-1/);
    await handle.terminate('test done');
  });
});
