import { spawn } from 'node:child_process';
import type { Client } from '@temporalio/client';
import {
  WORK_LEASE_DEFAULT,
  claimWorkUpdate,
  releaseWorkUpdate,
  resolveWorkUpdate,
  withFix,
  type WorkItem,
} from '../../contract';
import { WORK_CONDITIONS, durationMs, parseClaim, parseResolve } from '../../domain';
import { UsageError, durationFlag, listFlag, oneOf } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { checkNode } from '../nodes';
import { printLine } from '../output';
import type { CommandModule } from '../command';
import { listWork, readItemRun, sendWorkUpdate, type WorkFilter } from '../work';
import { payloadOf } from './work';

/*
 * `datum work serve --exec PROGRAM`: a program as a resolver (docs/work-items.md, "The resolver
 * protocol"). Each open, unclaimed item is claimed under a lease (of two resolvers racing, one
 * wins; the other moves on), PROGRAM reads it as JSON on stdin and writes its answer as JSON on
 * stdout, and the answer is sent as the item's resolve Update (or release). One JSON line per
 * item handled goes to stdout.
 */

interface ServeRaw extends ConnectionFlags {
  exec?: string;
  by?: string;
  node?: string;
  condition?: string;
  lease?: string;
  interval?: string;
  once?: boolean;
}

interface ServeInput {
  values: ServeRaw;
  program: string;
  by: string;
  filter: WorkFilter;
  lease: string;
  intervalMs: number;
  once: boolean;
}

export const workServeCommand: CommandModule<ServeRaw, ServeInput> = {
  input(values) {
    if (!values.exec) throw new UsageError(withFix('--exec is missing', 'name the resolver program, such as --exec ./resolver'));
    const lease = values.lease ?? WORK_LEASE_DEFAULT;
    const claim = parseClaim({ by: values.by, lease });
    if (!claim.ok) throw new UsageError(claim.error);
    return {
      values,
      program: values.exec,
      by: values.by!,
      filter: {
        nodes: listFlag(values.node).map(checkNode),
        conditions: oneOf(listFlag(values.condition), WORK_CONDITIONS, '--condition'),
        states: ['OPEN', 'ESCALATED'],
      },
      lease,
      intervalMs: values.interval === undefined ? 5000 : durationFlag(values.interval, '--interval'),
      once: values.once === true,
    };
  },
  async run(input) {
    return await withTemporal(input.values, async (client) => {
      let stop = false;
      const onSignal = () => void (stop = true);
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        let failed = 0;
        do {
          for (const row of await listWork(client, input.filter)) {
            if (stop) break;
            if ((await handle(client, row.id, input)) === 'failed') failed++;
          }
          if (!input.once && !stop) await new Promise((r) => setTimeout(r, input.intervalMs));
        } while (!input.once && !stop);
        return failed === 0 ? 0 : 1;
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
  },
};

type Outcome = 'resolved' | 'released' | 'skipped' | 'failed';

/** One item: claim it, ask the program, send its answer. Every outcome is one JSON line. */
async function handle(client: Client, id: string, input: ServeInput): Promise<Outcome> {
  let item: WorkItem;
  let runId: string;
  try {
    // The run read is the run claimed and resolved: a later run of the item is another episode.
    runId = (await readItemRun(client, id)).runId;
    item = await sendWorkUpdate(client, id, claimWorkUpdate, { by: input.by, lease: input.lease }, 30_000, runId);
  } catch (error) {
    // Another resolver won the claim, or the item closed meanwhile: not this one's to answer.
    printLine({ item: id, outcome: 'skipped', detail: (error as Error).message });
    return 'skipped';
  }
  try {
    const answer = await ask(input.program, item, durationMs(input.lease));
    if ('release' in answer) {
      await sendWorkUpdate(client, id, releaseWorkUpdate, { by: input.by }, 30_000);
      printLine({ item: id, outcome: 'released', note: answer.note });
      return 'released';
    }
    // Only under its own live claim, and on the episode that claim covers.
    const resolve = { ...answer.resolve, episode: item.claim?.episode ?? null };
    const result = await sendWorkUpdate(client, id, resolveWorkUpdate, payloadOf(resolve), 10 * 60_000, runId);
    printLine({
      item: id,
      outcome: 'resolved',
      resolution: answer.resolve.resolution,
      state: result.item.state,
      ledger_seq: result.entry?.seq ?? null,
    });
    return 'resolved';
  } catch (error) {
    printLine({ item: id, outcome: 'failed', detail: (error as Error).message });
    await sendWorkUpdate(client, id, releaseWorkUpdate, { by: input.by }, 30_000).catch(() => undefined);
    return 'failed';
  }
}

type Answer = { release: true; note: string | null } | { resolve: ReturnType<typeof parsedResolve> };

/** Runs PROGRAM with the item on stdin; its stdout must be one JSON answer (docs/work-items.md). */
async function ask(program: string, item: WorkItem, timeoutMs: number): Promise<Answer> {
  const { code, stdout, stderr } = await run(
    program,
    JSON.stringify(item),
    { ...process.env, DATUM_WORK_ITEM: item.id },
    timeoutMs,
  );
  if (code !== 0)
    throw new Error(
      withFix(`${program} exited with ${code}: ${stderr.trim().slice(0, 500)}`, 'the claim is released; fix the resolver'),
    );
  let answer: unknown;
  try {
    answer = JSON.parse(stdout);
  } catch {
    throw new Error(
      withFix(
        `${program} wrote no JSON answer on stdout: ${JSON.stringify(stdout.slice(0, 200))}`,
        'write one object such as {"resolution": "retake", "note": "why"}',
      ),
    );
  }
  const said = answer as { release?: unknown; note?: unknown } | null;
  if (said && typeof said === 'object' && said.release === true)
    return { release: true, note: typeof said.note === 'string' ? said.note : null };
  return { resolve: parsedResolve(answer, item.claim?.by ?? '') };
}

function parsedResolve(answer: unknown, by: string) {
  const parsed = parseResolve(answer && typeof answer === 'object' ? { ...answer, by } : answer);
  if (!parsed.ok)
    throw new Error(withFix(`the resolver's answer is refused: ${parsed.error}`, 'answer {"resolution": R, "note": "why"}'));
  return parsed.value;
}

function run(
  program: string,
  stdin: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, [], { env, stdio: ['pipe', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', (error) =>
      reject(new Error(withFix(`cannot run ${program}: ${error.message}`, 'give --exec an executable path'))),
    );
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(stdin);
  });
}
