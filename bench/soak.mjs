#!/usr/bin/env node
// Soak (issue 5): history stays bounded by continue-as-new over a long simulated run. One node's
// reconcileNode runs on the time-skipping test server for `hours` of skipped time, with the real
// controller worker (readAuthority, appendLedger into a SQLite ledger) and the real agent worker
// on a temp directory; the managed config file is edited out of band every 6 simulated hours so
// repair passes are in the mix, not only steady ones. Then the continue-as-new chain is walked
// run by run and each run's history is counted.
//
//   node bench/soak.mjs [--hours 24] [--resync 30s]     prints the result as JSON on stdout
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from '../scripts/build.mjs';
import { pct, writeFleet } from './fleet.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const dist = (p) => path.join(root, 'dist', 'src', p);

const NODE = 'SOAK-1';
const HOUR_MS = 3_600_000;
const DRIFT_EVERY_MS = 6 * HOUR_MS;
/**
 * Slack over the workflow's continue-as-new threshold. The threshold is checked once per cycle,
 * after the wait, so a run ends at most one cycle (a pass plus its wait) and the closing
 * continue-as-new task past it. One cycle is well under 100 events: a steady pass is about a
 * dozen, a repair of all three resources a few dozen.
 */
const CYCLE_SLACK = 100;
/**
 * Wall time one simulated step may take, per pass it should hold. A steady pass costs tens of
 * milliseconds; a second per pass means the loop is not waiting on its resync timer (the server
 * cannot skip time that no timer asks for), and waiting longer would only burn CPU.
 */
const WALL_MS_PER_PASS = 1000;
const MIN_STEP_WALL_MS = 30_000;

/** Runs the soak; resolves to the measurements (see the end of this function). */
export async function soak({ hours = 24, resync = '30s', log = console.error } = {}) {
  if (!(hours > 0)) throw new RangeError(`soak: hours ${hours} must be a positive number`);
  const t0 = Date.now();
  // The measurement must be of the code in src/, not of a dist/ left over from an older tree.
  log(`soak: ${build()}`);
  const resyncMs = require(dist('domain/index.js')).parseDuration(resync);
  if (!resyncMs) throw new RangeError(`soak: resync "${resync}" must be a positive duration such as 5m`);

  const { TestWorkflowEnvironment } = require('@temporalio/testing');
  const { DefaultLogger, Runtime, bundleWorkflowCode } = require('@temporalio/worker');
  const { encodeSearchAttributeIndexedValueType } = require('@temporalio/common/lib/search-attributes');
  const { temporalTestServerPath } = require(dist('worker/paths.js'));
  const { workflowBundleOptions } = require(dist('worker/bundle.js'));
  const { createControllerWorker } = require(dist('worker/controller.js'));
  const { runAgents } = require(dist('agent/worker.js'));
  const { openLedgerStore } = require(dist('activities/ledger-store.js'));
  const contract = require(dist('contract/index.js'));
  const threshold = contract.MAX_HISTORY_EVENTS;

  // The runtime is per process and configurable only before its first use; WARN keeps the
  // worker's per-task chatter out of the soak's output.
  if (Runtime._instance === undefined) Runtime.install({ logger: new DefaultLogger('WARN') });

  const dir = await mkdtemp(path.join(os.tmpdir(), 'datum-soak-'));
  const cleanup = [() => rm(dir, { recursive: true, force: true })];
  try {
    const { agentYaml, configFile } = await oneNodeFleet(dir, { resync, hours });
    const [env, bundle] = await Promise.all([
      TestWorkflowEnvironment.createTimeSkipping({
        server: { executable: { type: 'existing-path', path: temporalTestServerPath() } },
      }),
      bundleWorkflowCode({ ...workflowBundleOptions(), logger: quietBundler(log) }),
    ]);
    cleanup.unshift(() => env.teardown());
    // The test server takes no search attributes at start-up, yet a workflow task that upserts
    // an unregistered one fails and retries forever.
    await env.connection.operatorService.addSearchAttributes({
      namespace: 'default',
      searchAttributes: Object.fromEntries(
        contract.DATUM_SEARCH_ATTRIBUTES.map(({ name, type }) => [name, encodeSearchAttributeIndexedValueType(type)]),
      ),
    });

    // An explicit URL: DATUM_LEDGER_URL in the environment must not send the soak's entries elsewhere.
    const ledger = await openLedgerStore({ url: `sqlite:${path.join(dir, 'ledger.sqlite')}` });
    cleanup.unshift(() => ledger.close());
    const controller = await createControllerWorker({
      connection: env.nativeConnection,
      client: env.client,
      fleetDir: dir,
      ledger,
      workflowBundle: bundle,
    });
    const controllerRun = controller.run();
    cleanup.unshift(async () => {
      if (controller.getState() === 'RUNNING') controller.shutdown();
      await controllerRun;
    });
    const agents = await runAgents({ configPaths: [agentYaml], connection: env.nativeConnection, namespace: 'default' });
    cleanup.unshift(() => agents.shutdown());

    const workflowId = contract.reconcileWorkflowId(NODE, 1);
    const handle = await env.client.workflow.start(contract.WORKFLOW_TYPES.reconcileNode, {
      taskQueue: contract.CONTROL_TASK_QUEUE,
      workflowId,
      args: [{ node: NODE, generation: 1 }],
    });
    cleanup.unshift(() => handle.terminate('soak done').catch(() => undefined));
    log(`soak: ${workflowId} started; ${hours} simulated hours at resync ${resync}`);

    const soakStart = Date.now();
    const simStart = await env.currentTimeMs();
    const horizonMs = hours * HOUR_MS;
    let driftEdits = 0;
    let stalled = null;
    for (let at = 0; at < horizonMs;) {
      const step = Math.min(HOUR_MS, horizonMs - at);
      const budget = Math.max(MIN_STEP_WALL_MS, (step / resyncMs) * WALL_MS_PER_PASS);
      if (!(await sleepWithin(env, step, budget))) {
        const reached = ((await env.currentTimeMs()) - simStart) / HOUR_MS;
        stalled = `simulated time stalled at ${reached.toFixed(2)} h: ${step / 60_000} simulated minutes did not pass in ${budget / 1000} s of wall time, so the workflow is not waiting on its resync timer`;
        log(`soak: ${stalled}`);
        break;
      }
      at += step;
      // Out-of-band drift, never at the very end, so the soak finishes on a repaired node.
      const drift = at % DRIFT_EVERY_MS === 0 && at < horizonMs;
      if (drift) {
        driftEdits++;
        await writeFile(configFile, `${JSON.stringify({ workers: 1000 + driftEdits }, null, 2)}\n`);
      }
      log(
        `soak: ${(at / HOUR_MS).toFixed(1)} h simulated, ${((Date.now() - soakStart) / 1000).toFixed(1)} s wall${drift ? ', config edited out of band' : ''}`,
      );
    }
    const soakS = (Date.now() - soakStart) / 1000;
    const simulatedMs = (await env.currentTimeMs()) - simStart;

    const state = await env.client.workflow.getHandle(workflowId).query(contract.stateQuery);
    const runs = await continueAsNewChain(env.client, workflowId, handle.firstExecutionRunId);
    const cycles = passesOf(runs);
    const stored = await ledger.list(NODE);
    const sizes = runs.map((r) => r.events.length);
    const steady = cycles.filter((c) => !c.repair && c.events !== null).map((c) => c.events);
    const repairs = cycles.filter((c) => c.repair && c.events !== null).map((c) => c.events);
    const bound = threshold + CYCLE_SLACK;
    return {
      simulated_hours: Math.round((simulatedMs / HOUR_MS) * 100) / 100,
      target_hours: hours,
      completed: stalled === null,
      stalled,
      resync,
      wall_s: round1((Date.now() - t0) / 1000),
      soak_wall_s: round1(soakS),
      runs: runs.length,
      passes: cycles.length,
      // One at the start, then one per resync; the one due on the horizon itself has not run yet.
      passes_expected: Math.floor(simulatedMs / resyncMs),
      repair_passes: cycles.filter((c) => c.repair).length,
      drift_edits: driftEdits,
      events_per_run_max: Math.max(...sizes),
      events_per_run_p50: pct(sizes, 50),
      events_total: sizes.reduce((a, b) => a + b, 0),
      events_current_run: sizes[sizes.length - 1],
      events_per_steady_pass_p50: pct(steady, 50),
      events_per_steady_pass_max: steady.length ? Math.max(...steady) : null,
      events_per_repair_pass_max: repairs.length ? Math.max(...repairs) : null,
      ledger_entries: stored.length,
      ledger_entries_workflow: state.ledger_entries,
      repairs_recorded: stored.filter((e) => e.reason === 'CONVERGED_AFTER_REPAIR').length,
      final_status: `${state.convergence_status}/${state.reason}`,
      converged: state.convergence_status === 'CONVERGED',
      continue_as_new_threshold: threshold,
      history_bound: bound,
      bounded: Math.max(...sizes) <= bound,
    };
  } finally {
    for (const step of cleanup) {
      try {
        await step();
      } catch (error) {
        log(`soak: clean-up step failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
}

/**
 * A one-node fleet in `dir`, as bench/run.mjs builds one: a release, a config file and a flag.
 * watch is off: the test server does not skip time while an activity runs, and a watch runs
 * for minutes. observation_ttl covers the whole soak: the agent stamps observed_at with this
 * machine's clock while the workflow's `now` is the server's skipped clock, so by the end the two
 * are `hours` apart and the default 60s would judge every snapshot stale.
 */
async function oneNodeFleet(dir, { resync, hours }) {
  await writeFleet(dir, [NODE], {
    policy: { resync_interval: resync, node_timeout: '60s', observation_ttl: `${Math.ceil(hours) + 1}h`, watch: false },
  });
  return {
    agentYaml: path.join(dir, 'agents', `${NODE}.yaml`),
    configFile: path.join(dir, 'nodes', NODE, 'etc/app/config.json'),
  };
}

/** Every run of the chain, oldest first, following each WorkflowExecutionContinuedAsNew event. */
async function continueAsNewChain(client, workflowId, firstRunId) {
  const runs = [];
  for (let runId = firstRunId; runId;) {
    const { events } = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    runs.push({ runId, events });
    runId = events[events.length - 1]?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? null;
  }
  return runs;
}

/**
 * The passes in the histories. A pass starts with an observe; the observe right after an apply is
 * the same pass's post-action probe. `events` is the history a pass and its wait cost (to the next
 * pass in the same run); null for the last pass of a run.
 */
function passesOf(runs) {
  const passes = [];
  for (const { events } of runs) {
    const inRun = [];
    let previous = null;
    events.forEach((e, i) => {
      const type = e.activityTaskScheduledEventAttributes?.activityType?.name;
      if (!type) return;
      if (type === 'observe' && previous !== 'apply') inRun.push({ at: i, repair: false });
      if (type === 'apply' && inRun.length > 0) inRun[inRun.length - 1].repair = true;
      previous = type;
    });
    inRun.forEach((p, i) => passes.push({ repair: p.repair, events: i + 1 < inRun.length ? inRun[i + 1].at - p.at : null }));
  }
  return passes;
}

/**
 * Sleeps `ms` of simulated time; false when that takes longer than `wallMs` of wall time. The
 * late call is cancelled, not left running: the client would retry it on the closed connection
 * after teardown, and throw from a timer.
 */
async function sleepWithin(env, ms, wallMs) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), wallMs);
  try {
    await env.connection.withAbortSignal(abort.signal, () => env.sleep(ms));
    return true;
  } catch (error) {
    if (abort.signal.aborted) return false;
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

function quietBundler(log) {
  const drop = () => undefined;
  return { trace: drop, debug: drop, info: drop, log: drop, warn: drop, error: (m) => log(`soak: bundler: ${m}`) };
}

const round1 = (x) => Math.round(x * 10) / 10;

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const { values } = parseArgs({
      options: { hours: { type: 'string', default: '24' }, resync: { type: 'string', default: '30s' } },
    });
    const result = await soak({ hours: Number(values.hours), resync: values.resync });
    console.log(JSON.stringify(result, null, 2));
    // A soak that cannot fail proves nothing: a stall, unbounded history or a node left
    // unconverged fails it.
    const failures = [
      ...(result.completed ? [] : [result.stalled]),
      ...(result.bounded ? [] : [`a run reached ${result.events_per_run_max} events, past ${result.history_bound}`]),
      ...(result.converged ? [] : [`final status ${result.final_status}`]),
    ];
    if (failures.length > 0) {
      console.error(`soak: FAILED: ${failures.join('; ')}`);
      process.exitCode = 1;
    }
  } catch (error) {
    const usage = error instanceof RangeError || String(error?.code).startsWith('ERR_PARSE_ARGS');
    console.error(usage ? `${error.message}\nusage: node bench/soak.mjs [--hours 24] [--resync 30s]` : error);
    process.exitCode = 2;
  }
}
