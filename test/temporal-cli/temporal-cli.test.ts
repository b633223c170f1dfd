import { execFile, type ChildProcess } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileBytes, type LedgerEntry } from '../../src/domain';
import { temporalCliPath } from '../../src/worker/paths';
import type { NodeState } from '../../src/contract';
import { startConflictingWriter } from '../helpers/fleet';
import { useStack } from '../helpers/stack';
import { useChildren } from '../helpers/processes';

/*
 * Plain Temporal tools against Datum's names (docs/architecture.md §3 "The contract"): the commands an
 * operator copies from docs/operations.md ("Plain Temporal tools"), run as written through a shell by the real `temporal` binary.
 * The only thing the test adds is `--address` of its own dev server.
 */

/** The commands of docs/operations.md, verbatim and in the order it tells them. */
const README_COMMANDS = [
  `temporal workflow start --type reconcileNode --task-queue datum-control --workflow-id datum/T-1/gen-1 --input '{"node":"T-1","generation":1}'`,
  `temporal workflow query --workflow-id datum/T-1/gen-1 --name state --output json`,
  `temporal workflow list --query 'DatumStatus="CONFLICT"' --output json`,
  `temporal workflow list --query 'DatumStatus="CONFLICT" AND ExecutionStatus="Running"' --output json`,
  `temporal workflow signal --workflow-id datum/T-1/gen-1 --name resolveConflict --input '{"resource_key":"config","resolution":"yield","by":"oncall"}'`,
  `temporal workflow query --workflow-id datum/T-1/gen-1 --name ledger --output json`,
  `temporal workflow signal --workflow-id datum/T-1/gen-1 --name recheck --input '{}'`,
  `temporal workflow signal --workflow-id datum/T-1/gen-1 --name resolveConflict --input '{"resolution":"maybe"}'`,
] as const;
const [START, QUERY_STATE, LIST_CONFLICTS, LIST_OPEN_CONFLICTS, RESOLVE_YIELD, QUERY_LEDGER, RECHECK, RESOLVE_MALFORMED] =
  README_COMMANDS;

const NODE = 'T-1';
const WORKFLOW_ID = 'datum/T-1/gen-1';

const run = promisify(execFile);
const stack = useStack();
let binDir: string;
const children = useChildren();

beforeAll(async () => {
  await stack.fleet.writeDesired(NODE, 1);
  await stack.fleet.writeAgent(NODE, { mode: 'enforce' });
  await stack.startAgent(NODE);
  // `temporal` on PATH is the pinned binary, whatever its file is called (DATUM_TEMPORAL_CLI).
  binDir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-cli-bin-'));
  await fs.symlink(temporalCliPath(), path.join(binDir, 'temporal'));
});
afterAll(async () => {
  if (binDir) await fs.rm(binDir, { recursive: true, force: true });
});

/** Runs one documented command line through a POSIX shell (so its quoting is tested too). */
async function temporal(command: string): Promise<string> {
  // A developer's TEMPORAL_* variables or profile must not point the command elsewhere.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TEMPORAL_')));
  env.PATH = `${binDir}${path.delimiter}${process.env.PATH ?? ''}`;
  try {
    const { stdout } = await run('/bin/sh', ['-c', `${command} --address ${stack.env.address}`], {
      env,
      timeout: 30_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout;
  } catch (error) {
    const e = error as { stderr?: string; stdout?: string; message: string };
    throw new Error(`\`${command}\` failed: ${e.message}\nstdout: ${e.stdout ?? ''}\nstderr: ${e.stderr ?? ''}`);
  }
}

async function queryState(): Promise<NodeState> {
  // `--output json` wraps the result: {"queryResult": [<the query's return value>]}.
  const out = JSON.parse(await temporal(QUERY_STATE)) as { queryResult: [NodeState] };
  return out.queryResult[0];
}

async function queryLedger(): Promise<LedgerEntry[]> {
  const out = JSON.parse(await temporal(QUERY_LEDGER)) as { queryResult: [LedgerEntry[]] };
  return out.queryResult[0];
}

/** Repeats `probe` until `done` holds; fails with the last value seen. */
async function poll<T>(what: string, probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 45_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

interface ListedExecution {
  execution: { workflowId: string; runId: string };
  type: { name: string };
  status: string;
  memo?: { fields?: { summary?: string } };
}

const listed = async (command: string) => JSON.parse(await temporal(command)) as ListedExecution[];

function startWriter(file: string, content: string): ChildProcess {
  const child = startConflictingWriter(file, content);
  children.push(child);
  return child;
}

// One node's story, told in order: each step starts where the previous one left the loop.
describe.sequential('temporal CLI against Datum', () => {
  it('`temporal workflow start` starts a reconcile loop that converges, and `query --name state` says so', async () => {
    expect(await temporal(START)).toContain(WORKFLOW_ID);
    const state = await poll('CONVERGED', queryState, (s) => s.convergence_status === 'CONVERGED');
    expect(state).toMatchObject({ node: NODE, workflow_id: WORKFLOW_ID, desired_generation: 1, mode: 'enforce' });
    expect(state.desired_digest).toMatch(/^sha256:[a-f0-9]{64}$/);
  });

  it('`list --query DatumStatus="CONFLICT"` finds a node in conflict, and `signal resolveConflict` resolves it', async () => {
    startWriter(path.join(stack.fleet.root(NODE), 'etc/app/config.json'), fileBytes({ workers: 2 }));
    const conflict = await poll('CONFLICT', queryState, (s) => s.convergence_status === 'CONFLICT');
    expect(conflict.reason).toBe('CONFLICTING_WRITER');

    // Visibility is eventually consistent: the upserted DatumStatus shows up a little later.
    for (const command of [LIST_CONFLICTS, LIST_OPEN_CONFLICTS]) {
      const rows = await poll(
        `${WORKFLOW_ID} in \`${command}\``,
        () => listed(command),
        (r) => r.some((e) => e.execution.workflowId === WORKFLOW_ID),
      );
      const row = rows.find((e) => e.execution.workflowId === WORKFLOW_ID)!;
      expect(row.type.name).toBe('reconcileNode');
      expect(row.memo?.fields?.summary).toMatch(/^CONFLICT /);
    }

    await temporal(RESOLVE_YIELD);
    const resolved = await poll('leaving CONFLICT', queryState, (s) => s.convergence_status !== 'CONFLICT');
    expect(resolved.convergence_status).toBe('CONVERGED');
    // The CLI's JSON prints an empty list as null.
    expect(resolved.conditions ?? []).toEqual([]);
    const ledger = await queryLedger();
    const note = ledger.find((e) => e.reason === 'OPERATOR_RESOLUTION_RECORDED');
    expect(note?.reason_detail).toMatch(/oncall resolved the conflict on "config" by yield/);
  });

  it('`signal --name recheck` is accepted; a malformed resolveConflict shows as INVALID_SIGNAL in `state`', async () => {
    const sent = Date.now();
    await temporal(RECHECK);
    // Accepted: two passes judge fresh snapshots taken after it (the first may have been under
    // way when the signal came; the second began after the loop handled it), and neither
    // raised INVALID_SIGNAL.
    let verified = sent;
    let afterRecheck: NodeState | undefined;
    for (const pass of ['first', 'second']) {
      const since = verified;
      afterRecheck = await poll(
        `the ${pass} pass after recheck`,
        queryState,
        (s) => s.last_verified_at !== null && Date.parse(s.last_verified_at) > since,
      );
      verified = Date.parse(afterRecheck.last_verified_at!);
    }
    expect((afterRecheck!.conditions ?? []).map((c) => c.type)).not.toContain('INVALID_SIGNAL');
    expect(afterRecheck!.convergence_status).toBe('CONVERGED');

    await temporal(RESOLVE_MALFORMED);
    const state = await poll('INVALID_SIGNAL', queryState, (s) => (s.conditions ?? []).some((c) => c.type === 'INVALID_SIGNAL'));
    const invalid = state.conditions.find((c) => c.type === 'INVALID_SIGNAL')!;
    expect(invalid.message).toMatch(/resolveConflict/);
    expect(invalid.message).toMatch(/resolution/);
    expect(state.convergence_status).toBe('CONVERGED');
  });
});
