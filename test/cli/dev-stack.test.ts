import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { afterAll, describe, expect, it } from 'vitest';
import { FLEET_WORKFLOW_ID, fleetLookSignal } from '../../src/contract';
import { auditSqliteLedgersUnder } from '../helpers/ledger-audit';
import { until } from '../helpers/until';
import { DATUM, runDatum } from '../helpers/cli';

/*
 * `datum dev` as a user runs it (what `npm start` does): a real dev server with the Web UI,
 * a controller and five agents as processes, the first rollout, the CLI against it, Ctrl-C,
 * and a restart that resumes from the SQLite file.
 */

const run = promisify(execFile);
let dataDir: string;
let dev: ChildProcess | undefined;
let output = '';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

function startDev(port: number, uiPort: number): ChildProcess {
  output = '';
  const child = spawn(process.execPath, [DATUM, 'dev', '--data', dataDir, '--port', String(port), '--ui-port', String(uiPort)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    // The worker dev starts keeps the fleet workflow. It looks every 10 minutes here, so that only
    // `datum dev` itself (after the first rollout) and the test (after ending a loop) make it look.
    env: { ...process.env, DATUM_FLEET_INTERVAL: '10m' },
  });
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  return child;
}

/**
 * `until`, with dev's output so far in the timeout error; a dev that has exited fails it at once
 * with its output (it stops the stack when a process it started exits, and prints why). The test
 * has 240 s in all, so a wait that times out says what it saw before vitest's timeout says nothing.
 */
async function untilDev(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 90_000): Promise<void> {
  const running = dev;
  await until(check, {
    what,
    timeoutMs,
    context: () => `output so far:\n${output}`,
    giveUp: () =>
      running && running.exitCode !== null
        ? new Error(`datum dev exited (${running.exitCode}) before ${what}; its output:\n${output}`)
        : undefined,
  });
}

const datum = (port: number, ...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: `127.0.0.1:${port}`, DATUM_DATA: dataDir });

/** Ends a loop by hand, then asks the fleet workflow to look. */
async function terminate(port: number, workflowId: string, reason: string): Promise<void> {
  const connection = await Connection.connect({ address: `127.0.0.1:${port}` });
  try {
    const client = new Client({ connection });
    await client.workflow.getHandle(workflowId).terminate(reason);
    await client.workflow.getHandle(FLEET_WORKFLOW_ID).signal(fleetLookSignal);
  } finally {
    await connection.close();
  }
}

/** Processes whose working directory or command line points into the data dir. */
async function leftovers(): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const [cwd, cmd] = await Promise.all([fs.readlink(`/proc/${pid}/cwd`), fs.readFile(`/proc/${pid}/cmdline`, 'utf8')]);
      if (cwd.startsWith(dataDir) || cmd.includes(dataDir)) found.push(`${pid}: ${cmd.replace(/\0/g, ' ')}`);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

afterAll(async () => {
  if (dev && dev.exitCode === null) dev.kill('SIGKILL');
  for (const p of await leftovers()) process.kill(Number(p.split(':')[0]), 'SIGKILL');
  try {
    // The ledger `datum dev --data` wrote keeps its invariants (test/helpers/ledger-audit.ts).
    await auditSqliteLedgersUnder(dataDir);
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true });
  }
});

describe('datum dev (npm start)', () => {
  it('runs the demo fleet, answers the CLI, stops everything on Ctrl-C, and resumes on restart', async () => {
    dataDir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'datum-dev-')));
    const [port, uiPort] = [await freePort(), await freePort()];
    dev = startDev(port, uiPort);
    await untilDev('the first rollout and the next steps', () => output.includes('Ctrl-C stops everything'));
    expect(output).toMatch(/N-24\s+CONVERGED/);
    expect(output).toMatch(/N-25\s+DRIFTED\s+OBSERVE_MODE_DRIFT/);
    // Where dpkg is installed (here), N-26 reaches a package, a directory with an owner and mode, and a file's mode.
    expect(output).toMatch(/N-26\s+CONVERGED\s+CONVERGED_AFTER_REPAIR/);
    expect(output).toContain(`Web UI: http://127.0.0.1:${uiPort}/namespaces/default/workflows`);
    const ui = await fetch(`http://127.0.0.1:${uiPort}/`);
    expect(ui.status).toBe(200);

    // The CLI against the running stack.
    // A look taken before the rollout started the loops would name every node NO_RUNNING_LOOP:
    // dev has the fleet workflow look again before it prints the next steps.
    const status = await datum(port, 'status', '--json');
    expect(status.code).toBe(1); // N-25 drifts in observe mode: the fleet is not right
    const conditions = (JSON.parse(status.stdout) as { conditions: Array<{ node: string; type: string }> }).conditions;
    expect(new Set(conditions.map((c) => `${c.node}/${c.type}`))).toEqual(new Set(['N-25/OBSERVED_DRIFT']));
    // Without --fleet or DATUM_FLEET, status reads the view of the fleet workflow dev's worker keeps.
    expect(output).toContain(`TEMPORAL_ADDRESS=127.0.0.1:${port} npx datum status`);
    expect(JSON.parse(status.stdout)).toMatchObject({ fleet: null, declared: 6, watch: { watched: true } });
    await terminate(port, 'datum/N-23/gen-11', 'a loop ended by hand');
    const missing = await until(() => datum(port, 'status'), {
      what: "status to name N-23 at the fleet workflow's next look",
      accept: (r) => r.stdout.includes('N-23'),
      timeoutMs: 30_000,
    });
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/N-23\s+NO_RUNNING_LOOP\s.*datum\/N-23\/gen-11 terminated by .*"a loop ended by hand"/);
    expect((await datum(port, 'nodes')).stdout).toMatch(/N-23\s+NO LOOP\s+terminated/);
    const describeOut = await datum(port, 'describe', 'N-24');
    expect(describeOut.stdout).toMatch(/operator exception: maintenance/);

    // `datum import` on the demo node: desired state as N-26 is, which validates and rolls out with no action.
    const fleet = path.join(dataDir, 'fleet');
    const imported = await datum(port, 'import', 'N-26', '--fleet', fleet);
    expect(imported.stderr).toBe('');
    expect(imported.code).toBe(0);
    await fs.writeFile(path.join(fleet, 'desired/nodes/N-26.yaml'), imported.stdout);
    expect((await datum(port, 'validate', path.join(fleet, 'desired/nodes/N-26.yaml'))).code).toBe(0);
    const adopted = await datum(port, 'rollout', 'start', '--generation', '12', '--nodes', 'N-26', '--fleet', fleet, '--wait');
    expect(adopted.stdout).toMatch(/N-26\s+CONVERGED\s+ALREADY_CONVERGED/);
    const gen12 = JSON.parse((await datum(port, 'ledger', 'N-26', '--json')).stdout) as Array<{
      desired_generation: number;
      authorized_actions: unknown[];
    }>;
    expect(gen12.filter((e) => e.desired_generation === 12).flatMap((e) => e.authorized_actions)).toEqual([]);

    await fs.copyFile(path.join(dataDir, 'fleet/next/N-24.yaml'), path.join(dataDir, 'fleet/desired/nodes/N-24.yaml'));
    const rollout = await datum(port, 'rollout', 'start', '--generation', '12', '--nodes', 'N-24', '--wait');
    expect(rollout.code).toBe(0);
    expect(rollout.stdout).toMatch(/N-24\s+CONVERGED\s+CONVERGED_AFTER_REPAIR/);
    const ledger = await datum(port, 'ledger', 'N-24', '--json');
    const entries = JSON.parse(ledger.stdout) as Array<{ desired_generation: number; convergence_status: string }>;
    expect(entries.some((e) => e.desired_generation === 12 && e.convergence_status === 'CONVERGED')).toBe(true);
    const before = JSON.parse((await datum(port, 'describe', 'N-24', '--json')).stdout) as {
      state: { workflow_id: string; last_verified_at: string };
    };
    expect(before.state.workflow_id).toBe('datum/N-24/gen-12');

    // Ctrl-C: every process it started exits, the node services too.
    dev.kill('SIGINT');
    await untilDev('dev to exit', () => dev!.exitCode !== null, 60_000);
    expect(output).toContain('every process it started has exited');
    expect(await leftovers()).toEqual([]);

    // Again: resumes from the SQLite file; the same loops are there and carry on.
    dev = startDev(port, uiPort);
    await untilDev('the restart', () => output.includes('Ctrl-C stops everything'));
    expect(output).toMatch(/The first rollout ran at .*; the reconcile loops resume/);
    await untilDev('N-24 re-verified after the restart', async () => {
      const after = await datum(port, 'describe', 'N-24', '--json');
      if (after.code !== 0) return false;
      const state = (JSON.parse(after.stdout) as typeof before).state;
      return (
        state.workflow_id === 'datum/N-24/gen-12' &&
        Date.parse(state.last_verified_at) > Date.parse(before.state.last_verified_at)
      );
    });
    dev.kill('SIGINT');
    await untilDev('dev to exit', () => dev!.exitCode !== null, 60_000);
    expect(await leftovers()).toEqual([]);
  }, 240_000);

  it('names the busy port and the flag to change', async () => {
    const blocker = net.createServer().listen(0, '127.0.0.1');
    await new Promise((r) => blocker.once('listening', r));
    const { port } = blocker.address() as net.AddressInfo;
    const result = await run(process.execPath, [DATUM, 'dev', '--data', dataDir, '--port', String(port)]).catch(
      (e: { code: number; stderr: string }) => e,
    );
    blocker.close();
    expect((result as { code: number }).code).toBe(2);
    expect((result as { stderr: string }).stderr).toMatch(new RegExp(`port ${port} is in use .* pass --port with a free port`));
  });
});
