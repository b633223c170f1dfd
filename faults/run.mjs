#!/usr/bin/env node
// Fault-injection harness (issue 10, must-show 4). Not a test: it measures. It runs a real dev
// server, a real controller (`datum worker`) and a real `datum agent` as child processes, as
// bench/run.mjs does, on one node whose every generation is a repair of three actions: install a
// new release, write the config file, restart the service. Into each repair it injects kill -9 of
// the worker, the agent or the Temporal server (restarted on the same SQLite file) at one step:
//   before_apply               the pass has observed; no action has run
//   after_first_action         the agent has journalled the first action of the batch
//   between_apply_and_probe    every action is journalled; the post-action probe has not run
//   during_ledger_append       the ledger store's file is being written after the probe
// then restarts what it killed, lets the loop settle, and counts from evidence outside Datum:
// service starts (the managed app's own start log), file writes (inotify + inode/mtime markers of
// the managed file), ledger entries the workflow recorded that the store lacks, a final status that
// disagrees with the disk, and writes outside the node root. faults/README.md says more.
//
//   npm run faults -- [--runs 20] [--only worker|agent|server|STEP|KIND:STEP] [--keep]
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { pct } from '../bench/fleet.mjs';
import { buildArtifact } from '../scripts/build-artifact.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const dist = (p) => path.join(root, 'dist', 'src', p);
const { Client, Connection } = require('@temporalio/client');
const Database = require('better-sqlite3');
const { stringify } = require('yaml');
const { temporalCliPath } = require(dist('worker/paths.js'));
const { devServerFlags } = require(dist('worker/dev-server.js'));
const { readServiceState, stopServices } = require(dist('agent/services/index.js'));
const { freePort } = require(dist('agent/services/launch.js'));
const contract = require(dist('contract/index.js'));
const { DesiredStateAuthority } = require(dist('activities/authority.js'));

const KINDS = ['worker', 'agent', 'server'];
const STEPS = ['before_apply', 'after_first_action', 'between_apply_and_probe', 'during_ledger_append'];
// Not in the default matrix, only when named: the last action has taken effect and its journal
// entry is being written (its temp file exists, the rename into place has not happened).
const EXTRA_STEPS = ['before_last_journal_record'];
const NODE = 'F-0001';
const SETTLE_LIMIT_MS = 240_000;
const USAGE = 'usage: npm run faults -- [--runs 20] [--only worker|agent|server|STEP|KIND:STEP] [--name RESULTS_NAME] [--keep]';

function fail(message) {
  console.error(`faults: ${message}\n${USAGE}`);
  process.exit(2);
}
let values;
try {
  ({ values } = parseArgs({
    options: {
      runs: { type: 'string', default: '20' },
      only: { type: 'string', multiple: true, default: [] },
      keep: { type: 'boolean', default: false },
      name: { type: 'string' },
    },
  }));
} catch (e) {
  fail(e.message);
}
const runsPerCell = Number(values.runs);
if (!Number.isInteger(runsPerCell) || runsPerCell < 1) fail(`--runs ${values.runs} must be a whole number of 1 or more`);
const named = (kind, step) => values.only.some((o) => o === step || o === `${kind}:${step}`);
const cells = [
  ...KINDS.flatMap((kind) => STEPS.map((step) => ({ kind, step }))).filter(
    ({ kind, step }) => values.only.length === 0 || values.only.includes(kind) || named(kind, step),
  ),
  ...KINDS.flatMap((kind) => EXTRA_STEPS.map((step) => ({ kind, step }))).filter(({ kind, step }) => named(kind, step)),
];
if (values.name !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(values.name))
  fail(`--name ${values.name} must be a plain file name such as 2026-12-01-journal (letters, digits, ".", "_", "-")`);
if (cells.length === 0)
  fail(
    `--only ${values.only.join(',')} picks nothing: name a kind (${KINDS.join(', ')}), a step (${[...STEPS, ...EXTRA_STEPS].join(', ')}) or KIND:STEP`,
  );

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const say = (m) => console.error(`faults: ${m}`);
async function patiently(read, tries = 40, waitMs = 500) {
  for (let i = 1; ; i++) {
    try {
      return await read();
    } catch (error) {
      if (i >= tries) throw error;
      await sleep(waitMs);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 1. The fleet: one node, its root, and the things next to it that nothing may write.

function layout(dir) {
  return {
    dir,
    nodeRoot: path.join(dir, 'nodes', NODE),
    agentConfig: path.join(dir, 'agents', `${NODE}.yaml`),
    desired: path.join(dir, 'desired', 'nodes', `${NODE}.yaml`),
    artifacts: path.join(dir, 'artifacts'),
    data: path.join(dir, 'data'),
    temporalDb: path.join(dir, 'temporal', 'temporal.sqlite'),
    logs: path.join(dir, 'logs'),
    evidence: path.join(dir, 'evidence'),
    startLog: path.join(dir, 'evidence', 'starts.log'),
    appSource: path.join(dir, 'evidence', 'app-src'),
  };
}
const CONFIG_REL = 'etc/app/config.json';
// Harness-owned or Datum-owned-by-design paths under the fleet dir; everything else must not change.
const NOT_WATCHED = (f) => [f.nodeRoot, f.data, path.dirname(f.temporalDb), f.logs, f.evidence];

async function writeFleetDir(f) {
  for (const d of ['desired/nodes', 'agents', 'artifacts', 'data', 'temporal', 'logs', 'evidence/app-src'])
    await mkdir(path.join(f.dir, d), { recursive: true });
  await mkdir(f.nodeRoot, { recursive: true });
  // Sentinels: a sibling of the root whose name shares its prefix, a tree beside the roots, and a
  // file in the fleet dir itself. A write that escapes the root by a path trick lands in one of them.
  const sentinels = {
    [`nodes/${NODE}-sibling/etc/app/config.json`]: '{"sentinel": true}\n',
    [`nodes/${NODE}-sibling/current`]: 'not a link\n',
    'nodes/neighbour/releases/README': 'sentinel\n',
    'sentinel/.datum/journal/README': 'sentinel\n',
    'sentinel.txt': 'sentinel\n',
  };
  for (const [rel, text] of Object.entries(sentinels)) {
    await mkdir(path.dirname(path.join(f.dir, rel)), { recursive: true });
    await writeFile(path.join(f.dir, rel), text);
  }
  await writeFile(f.startLog, '');
  const app = await readFile(path.join(root, 'faults', 'app', 'server.js'), 'utf8');
  await writeFile(path.join(f.appSource, 'server.js'), app.replace('__START_LOG__', f.startLog));
  await writeFile(f.agentConfig, stringify({ node: NODE, root: f.nodeRoot, reconciliation: { mode: 'enforce' } }));
}

/** Generation g: release f<g> (a fresh artifact), config {workers: g}, the service on both. */
async function writeGeneration(f, g) {
  const version = `f${g}`;
  const { file, sha256 } = await buildArtifact({ version, outDir: f.artifacts, sourceDir: f.appSource });
  const resources = {
    build: { type: 'release', version, artifact: file, sha256 },
    config: { type: 'file', path: CONFIG_REL, content: { workers: g } },
    app: { type: 'service', release: 'build', config: 'config', command: ['node', 'server.js'] },
  };
  // No watch: the harness, not a drift event, starts each repair. resync_interval 30s is the
  // loop's own safety net after a fault; the harness never sends a recheck.
  const policy = { resync_interval: '30s', node_timeout: '60s', observation_ttl: '120s', conflict_window: '0s', watch: false };
  await writeFile(f.desired, stringify({ node: NODE, generation: g, resources, policy }));
  const read = await new DesiredStateAuthority(f.dir).read(NODE);
  if (!read.ok) throw new Error(`desired state for generation ${g} does not read: ${read.error}`);
  return read.intent.digest;
}

// ---------------------------------------------------------------------------------------------
// 2. The stack: real processes, each killable with SIGKILL and restartable.

class Stack {
  constructor(f, port) {
    this.f = f;
    this.port = port;
    this.address = `127.0.0.1:${port}`;
    this.procs = {};
    this.restarts = { worker: 0, agent: 0, server: 0 };
  }
  spawnLogged(name, command, args) {
    const n = this.restarts[name]++;
    const out = fs.openSync(path.join(this.f.logs, `${name}-${n}.log`), 'a');
    const child = spawn(command, args, { stdio: ['ignore', out, out] });
    fs.closeSync(out);
    child.exited = new Promise((resolve) => child.on('exit', resolve));
    this.procs[name] = child;
    return child;
  }
  async startServer() {
    this.spawnLogged('server', temporalCliPath(), [
      'server',
      'start-dev',
      '--headless',
      '--ip',
      '127.0.0.1',
      '--port',
      String(this.port),
      '--db-filename',
      this.f.temporalDb,
      '--log-level',
      'error',
      ...devServerFlags(),
    ]);
    for (let i = 0; ; i++) {
      try {
        this.connection ??= await Connection.connect({ address: this.address });
        await this.connection.workflowService.getSystemInfo({});
        break;
      } catch (e) {
        if (i > 200) throw e;
        await sleep(200);
      }
    }
    this.client ??= new Client({ connection: this.connection });
  }
  startWorker() {
    this.spawnLogged('worker', process.execPath, [
      path.join(root, 'bin', 'datum.js'),
      'worker',
      '--fleet',
      this.f.dir,
      '--data',
      this.f.data,
      '--address',
      this.address,
    ]);
  }
  startAgent() {
    this.spawnLogged('agent', process.execPath, [
      path.join(root, 'bin', 'datum.js'),
      'agent',
      '--address',
      this.address,
      '--config',
      this.f.agentConfig,
    ]);
  }
  async start(kind) {
    if (kind === 'server') await this.startServer();
    else if (kind === 'worker') this.startWorker();
    else this.startAgent();
  }
  /** kill -9, and wait until the process is gone (its port and files released). */
  async kill(kind) {
    const child = this.procs[kind];
    child.kill('SIGKILL');
    await child.exited;
  }
  async stop() {
    for (const kind of ['agent', 'worker', 'server']) {
      const child = this.procs[kind];
      if (child && child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await Promise.race([child.exited, sleep(5000)]);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Evidence outside Datum: starts, file writes, the journal count, the tree outside the root.

/** Every distinct (inode, mtime, size) the managed file has had, seen by inotify on its directory. */
class FileWrites {
  constructor(file) {
    this.file = file;
    this.markers = [];
    this.last = this.marker();
  }
  marker() {
    try {
      const st = fs.statSync(this.file, { bigint: true });
      return `${st.ino}:${st.mtimeNs}:${st.size}`;
    } catch {
      return null;
    }
  }
  sample() {
    const m = this.marker();
    if (m !== null && m !== this.last) this.markers.push({ at: Date.now(), marker: m });
    this.last = m;
  }
  watch() {
    this.watcher = fs.watch(path.dirname(this.file), () => this.sample());
    // Sampling too, in case two writes fall between inotify callbacks' stats.
    this.timer = setInterval(() => this.sample(), 20);
  }
  close() {
    this.watcher?.close();
    clearInterval(this.timer);
  }
}

const startsIn = (f) => fs.readFileSync(f.startLog, 'utf8').split('\n').filter(Boolean).length;
// Finished journal entries only: atomicWriteJson's temp file (.<key>.json.datum-tmp-…) is not one.
const JOURNAL_ENTRY = /^[0-9a-f]{64}\.json$/;
const journalTemps = (f) => {
  try {
    return fs.readdirSync(path.join(f.nodeRoot, '.datum', 'journal')).filter((n) => n.includes('.datum-tmp-')).length;
  } catch {
    return 0;
  }
};
const journalCount = (f) => {
  try {
    return fs.readdirSync(path.join(f.nodeRoot, '.datum', 'journal')).filter((n) => JOURNAL_ENTRY.test(n)).length;
  } catch {
    return 0;
  }
};

/** Every path under the fleet dir outside the root and the harness's own dirs, with its lstat. */
function treeOutside(f) {
  const skip = new Set(NOT_WATCHED(f));
  const out = {};
  const walk = (d) => {
    for (const name of fs.readdirSync(d)) {
      const p = path.join(d, name);
      if (skip.has(p)) continue;
      const st = fs.lstatSync(p, { bigint: true });
      out[path.relative(f.dir, p)] = `${st.mode}:${st.ino}:${st.size}:${st.mtimeNs}`;
      if (st.isDirectory()) walk(p);
    }
  };
  walk(f.dir);
  return out;
}
function treeDiff(before, after) {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].filter((k) => before[k] !== after[k]).sort();
}

/** Is the node, on disk and by its own health endpoint, at generation g? */
async function diskAt(f, g) {
  const why = [];
  const link = await fs.promises.readlink(path.join(f.nodeRoot, 'current')).catch(() => null);
  if (link === null || path.basename(link) !== `f${g}`) why.push(`current -> ${link}`);
  const bytes = await readFile(path.join(f.nodeRoot, CONFIG_REL)).catch(() => null);
  let content = null;
  try {
    content = JSON.parse(String(bytes));
  } catch {
    /* recorded below as not at desired */
  }
  if (content?.workers !== g || Object.keys(content).length !== 1) why.push(`config ${String(bytes).trim()}`);
  const state = await readServiceState(f.nodeRoot, 'app').catch(() => null);
  const health = state
    ? await fetch(`http://127.0.0.1:${state.port}/health`, { signal: AbortSignal.timeout(2000) })
        .then((r) => r.json())
        .catch((e) => ({ error: e.message }))
    : { error: 'no service state' };
  const sha = bytes ? createHash('sha256').update(bytes).digest('hex') : null;
  if (health.build !== `f${g}` || health.config_sha256 !== sha) why.push(`service health ${JSON.stringify(health)}`);
  return { ok: why.length === 0, why };
}

// ---------------------------------------------------------------------------------------------
// 4. History: the events that say where a kill landed.

const ms = (t) => (t ? (typeof t.seconds === 'object' ? t.seconds.toNumber() : Number(t.seconds)) * 1000 + t.nanos / 1e6 : 0);
/** The workflow's events, simplified: {id, at, kind, activity?, scheduled?}. */
async function events(handle) {
  const h = await handle.fetchHistory();
  const types = {};
  return h.events.map((e) => {
    const id = Number(e.eventId);
    const at = ms(e.eventTime);
    if (e.activityTaskScheduledEventAttributes) {
      const activity = e.activityTaskScheduledEventAttributes.activityType.name;
      types[id] = activity;
      return { id, at, kind: 'scheduled', activity };
    }
    if (e.activityTaskCompletedEventAttributes) {
      const s = Number(e.activityTaskCompletedEventAttributes.scheduledEventId);
      return { id, at, kind: 'completed', activity: types[s], scheduled: s };
    }
    if (e.workflowTaskCompletedEventAttributes) return { id, at, kind: 'wft_completed' };
    return { id, at, kind: 'other' };
  });
}

// ---------------------------------------------------------------------------------------------
// 5. Triggers: each step's moment, watched for as it happens.

/** Resolves at the first moment `check` holds, polled every `everyMs`. */
async function when(check, everyMs, limitMs, what) {
  const t0 = Date.now();
  for (;;) {
    if (await check()) return;
    if (Date.now() - t0 > limitMs) throw new Error(`${what} did not happen within ${limitMs / 1000} s`);
    await sleep(everyMs);
  }
}

/**
 * How each step is hit. The journal is the agent's evidence of an applied action
 * (<root>/.datum/journal/<key>.json), written before the apply activity returns; the ledger store
 * is SQLite in WAL mode, so its append is a write to ledger.sqlite-wal.
 */
async function triggerFor(step, kind, ctx) {
  const { f, handle, journal0, actions } = ctx;
  const history = async (pred) => {
    try {
      return pred(await events(handle));
    } catch {
      return false; // not started yet
    }
  };
  if (step === 'before_apply') {
    // The worker and the server: the pre-action observe is scheduled, so the worker is idle until
    // it completes and no apply can be scheduled without them. The agent: the first apply is
    // scheduled, so the agent is about to run it.
    const activity = kind === 'agent' ? 'apply' : 'observe';
    return when(() => history((es) => es.some((e) => e.kind === 'scheduled' && e.activity === activity)), 15, 120_000, step);
  }
  if (step === 'after_first_action') return when(() => journalCount(f) >= journal0 + 1, 2, 120_000, step);
  if (step === 'between_apply_and_probe') return when(() => journalCount(f) >= journal0 + actions, 2, 120_000, step);
  if (step === 'before_last_journal_record') return lastJournalTemp(f, journal0 + actions - 1, ctx.temps0);
  // during_ledger_append: armed once every action is journalled, fired by the next write to the
  // store's WAL (the append of the repair's post-probe decision).
  await when(() => journalCount(f) >= journal0 + actions, 2, 120_000, 'the batch');
  const wal = path.join(f.data, 'ledger.sqlite-wal');
  const size0 = fs.statSync(wal).size;
  const mtime0 = fs.statSync(wal).mtimeMs;
  return new Promise((resolve) => {
    let done = false;
    const fire = () => {
      if (done) return;
      const st = fs.statSync(wal);
      if (st.size === size0 && st.mtimeMs === mtime0) return;
      done = true;
      watcher.close();
      clearInterval(timer);
      resolve();
    };
    const watcher = fs.watch(f.data, fire);
    const timer = setInterval(fire, 2);
  });
}

/**
 * The last action's journal temp file, seen by inotify on the journal directory (a 1 ms poll
 * alone misses it: it lives only for the write, the fsync and the rename). Resolves with false
 * when the batch finished without it being seen.
 */
function lastJournalTemp(f, entriesBefore, temps0) {
  const dir = path.join(f.nodeRoot, '.datum', 'journal');
  return new Promise((resolve) => {
    let done = false;
    const finish = (seen) => {
      if (done) return;
      done = true;
      watcher.close();
      clearInterval(timer);
      resolve(seen);
    };
    const check = (name) => {
      const entries = journalCount(f);
      if (entries > entriesBefore) return finish(false);
      // An event arrives after the fact: the temp file of an entry already renamed into place
      // (the action before) is not the one being written.
      const pending = name?.includes('.datum-tmp-') && !fs.existsSync(path.join(dir, name.slice(1).split('.datum-tmp-')[0]));
      if (entries === entriesBefore && (pending || journalTemps(f) > temps0)) finish(true);
    };
    const watcher = fs.watch(dir, (_event, name) => check(name));
    const timer = setInterval(check, 1);
  });
}

/** Did the kill land at the intended step? Judged after the fact from the disk and the history. */
function landedAt(step, kind, atKill, evs, actions) {
  const before = evs.filter((e) => e.at <= atKill.at);
  const applies = before.filter((e) => e.kind === 'scheduled' && e.activity === 'apply');
  const noEffects = atKill.journal === 0 && atKill.starts === 0 && atKill.writes === 0;
  if (step === 'before_apply') return noEffects && (kind === 'agent' || applies.length === 0);
  if (step === 'after_first_action') return atKill.journal === 1 && atKill.starts === 0;
  if (step === 'before_last_journal_record') return atKill.journal === actions - 1 && atKill.starts === 1;
  const lastApply = applies.at(-1);
  const probe = lastApply && evs.find((e) => e.kind === 'completed' && e.activity === 'observe' && e.id > lastApply.id);
  if (step === 'between_apply_and_probe') {
    const probeScheduled = before.some(
      (e) => e.kind === 'scheduled' && e.activity === 'observe' && lastApply && e.id > lastApply.id,
    );
    return atKill.journal === actions && !probeScheduled;
  }
  // during_ledger_append: the probe had completed, and the workflow task that appends (and records
  // the append's marker) had not completed.
  if (!probe || probe.at > atKill.at) return false;
  return !before.some((e) => e.kind === 'wft_completed' && e.id > probe.id);
}

// ---------------------------------------------------------------------------------------------
// 6. One run: a repair, a kill at its step, the restart, the settle, the count.

async function settle(ctx, g, t0) {
  const { f, handle } = ctx;
  for (;;) {
    if (Date.now() - t0 > SETTLE_LIMIT_MS) return null;
    await sleep(500);
    try {
      const st = await handle.query(contract.stateQuery);
      if (st.convergence_status !== 'CONVERGED' || st.desired_generation !== g) continue;
      const d = await handle.describe();
      if ((d.raw.pendingActivities ?? []).length > 0) continue;
      if (!(await diskAt(f, g)).ok) continue;
      return Date.now() - t0;
    } catch {
      // The server or the worker is still coming back.
    }
  }
}

// What makes two entries under one key the same decision. Not decided_at: a workflow task run
// again after its worker died mid-append decides the same thing on a later clock, and the store
// keeps the first record of it (src/activities/ledger-store/common.ts assertSameEntry).
const SAME = ['convergence_status', 'reason', 'desired_generation', 'execution_evidence'];
/** Entries the workflows' `ledger` queries show (and seq gaps) that the store does not hold. */
async function lostEntries(stack, f, workflowIds) {
  const db = new Database(path.join(f.data, 'ledger.sqlite'), { readonly: true, fileMustExist: true });
  try {
    const lost = [];
    for (const id of workflowIds) {
      const rows = db.prepare('SELECT seq, entry FROM ledger_entries WHERE workflow_id = ? ORDER BY seq').all(id);
      const stored = new Map(rows.map((r) => [r.seq, JSON.parse(r.entry)]));
      const recorded = await stack.client.workflow.getHandle(id).query(contract.ledgerQuery);
      for (const e of recorded) {
        const s = stored.get(e.seq);
        const what = `${id}#${e.seq} (${e.convergence_status}/${e.reason} at ${e.decided_at})`;
        if (!s) lost.push(what);
        // The same key holding another decision is the workflow's decision missing all the same.
        else if (SAME.some((k) => JSON.stringify(s[k]) !== JSON.stringify(e[k])))
          lost.push(
            `${what}: the store holds another entry under its key (${s.convergence_status}/${s.reason} at ${s.decided_at})`,
          );
      }
      const seqs = [...stored.keys()];
      for (let s = Math.min(...seqs); s < Math.max(...seqs); s++) if (!stored.has(s)) lost.push(`${id}#${s} (gap in the store)`);
    }
    return lost;
  } finally {
    db.close();
  }
}

async function oneRun(ctx, fault) {
  const { stack, f } = ctx;
  const g = ctx.generation + 1;
  const digest = await writeGeneration(f, g);
  const outside0 = treeOutside(f);
  const starts0 = startsIn(f);
  const writes = new FileWrites(path.join(f.nodeRoot, CONFIG_REL));
  writes.watch();
  const previous = stack.client.workflow.getHandle(contract.reconcileWorkflowId(NODE, ctx.generation));
  const handle = stack.client.workflow.getHandle(contract.reconcileWorkflowId(NODE, g));
  const run = {
    ...ctx,
    handle,
    journal0: journalCount(f),
    temps0: journalTemps(f),
    workflowIds: [previous.workflowId, handle.workflowId],
  };
  const t0 = Date.now();
  await patiently(() => previous.signal(contract.refreshDesiredSignal, { generation: g, digest }));
  let atKill = null;
  if (fault) {
    // A trigger that did not fire still kills, at once: the run counts as not landed.
    await triggerFor(fault.step, fault.kind, run).catch((e) => say(`${fault.kind} × ${fault.step}: ${e.message}`));
    writes.sample();
    atKill = {
      at: Date.now(),
      journal: journalCount(f) - run.journal0,
      starts: startsIn(f) - starts0,
      writes: writes.markers.length,
    };
    await stack.kill(fault.kind);
    await stack.start(fault.kind);
  }
  const settleMs = await settle(run, g, atKill?.at ?? t0);
  await sleep(1500); // a late duplicate (a retried apply) would show here
  writes.sample();
  writes.close();
  const starts = startsIn(f) - starts0;
  // The store is written right after each decision; give it 10 s to hold every recorded entry.
  let lostAll = [];
  for (let i = 0; i < 20; i++) {
    lostAll = await lostEntries(stack, f, run.workflowIds).catch((e) => [`unreadable: ${e.message}`]);
    if (lostAll.length === 0) break;
    await sleep(500);
  }
  const lost = lostAll.filter((e) => !e.startsWith(`${previous.workflowId}#`));
  const st = await patiently(() => handle.query(contract.stateQuery), 20).catch(() => null);
  const disk = await diskAt(f, g);
  const converged = st?.convergence_status === 'CONVERGED';
  const outside = treeDiff(outside0, treeOutside(f));
  const evs = await patiently(() => events(handle), 20).catch(() => []);
  const applies = evs.filter((e) => e.kind === 'scheduled' && e.activity === 'apply').length;
  ctx.generation = g;
  return {
    fault: fault ? fault.kind : 'none',
    step: fault ? fault.step : 'none',
    generation: g,
    landed: fault ? landedAt(fault.step, fault.kind, atKill, evs, ctx.actions) : null,
    at_kill: atKill && { ...atKill, at: new Date(atKill.at).toISOString() },
    service_starts: starts,
    file_writes: writes.markers.length,
    duplicates: Math.max(0, starts - 1) + Math.max(0, writes.markers.length - 1),
    lost: lost.length,
    lost_entries: lost,
    status: st?.convergence_status ?? null,
    reason: st?.reason ?? null,
    disk_at_desired: disk.ok,
    disk_why: disk.why,
    disagreement: converged !== disk.ok,
    outside_writes: outside.length,
    outside_paths: outside,
    settled: settleMs !== null,
    settle_s: settleMs === null ? null : settleMs / 1000,
    wall_s: (Date.now() - t0) / 1000,
    apply_activities_scheduled: applies,
    lostBefore: lostAll.filter((e) => e.startsWith(`${previous.workflowId}#`)),
  };
}

// ---------------------------------------------------------------------------------------------
// 7. The matrix, the results.

async function main() {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'datum-faults-'));
  const f = layout(dir);
  await writeFleetDir(f);
  const stack = new Stack(f, await freePort());
  const results = [];
  const started = new Date();
  try {
    await stack.startServer();
    stack.startWorker();
    stack.startAgent();
    // Generation 1 converges with no fault: the baseline every repair starts from.
    await writeGeneration(f, 1);
    const g1 = contract.reconcileWorkflowId(NODE, 1);
    await stack.client.workflow.start(contract.WORKFLOW_TYPES.reconcileNode, {
      taskQueue: contract.CONTROL_TASK_QUEUE,
      workflowId: g1,
      args: [{ node: NODE, generation: 1 }],
    });
    await when(async () => (await diskAt(f, 1)).ok, 500, 180_000, 'generation 1 on disk');
    const ctx = { stack, f, generation: 1, actions: 0 };
    // Control: one repair with no fault, which also counts the batch's actions for the triggers.
    const j0 = journalCount(f);
    const { lostBefore: baselineLost, ...control } = await oneRun(ctx, null);
    control.lost_entries.push(...baselineLost);
    control.lost = control.lost_entries.length;
    ctx.actions = journalCount(f) - j0;
    results.push(control);
    say(
      `control repair: ${ctx.actions} actions, settled in ${control.settle_s} s, starts ${control.service_starts}, writes ${control.file_writes}`,
    );
    if (ctx.actions < 2) throw new Error(`the control repair journalled ${ctx.actions} action(s), not several; see ${f.logs}`);
    // Round-robin over the cells: a matrix stopped early is still even.
    for (let i = 1; i <= runsPerCell; i++) {
      for (const cell of cells) {
        const { lostBefore, ...r } = await oneRun(ctx, cell);
        // The previous loop's entries, checked again after it handed over, belong to its own run.
        const previous = results.at(-1);
        const late = lostBefore.filter((e) => !previous.lost_entries.includes(e));
        previous.lost_entries.push(...late.map((e) => `${e} (found after the hand-over)`));
        previous.lost = previous.lost_entries.length;
        results.push({ ...r, run: i });
        say(
          `${cell.kind} × ${cell.step} #${i}: landed ${r.landed}, dup ${r.duplicates}, lost ${r.lost}, disagree ${r.disagreement}, outside ${r.outside_writes}, settle ${r.settle_s} s`,
        );
        await writeResults(started, results, ctx);
      }
    }
    await writeResults(started, results, ctx);
  } finally {
    await stack.stop();
    await stopServices(f.nodeRoot).catch(() => undefined);
    if (values.keep) say(`kept ${dir}`);
    else await rm(dir, { recursive: true, force: true });
  }
}

function summarize(results) {
  const keys = [...new Set(results.map((r) => `${r.fault}|${r.step}`))];
  return keys.map((k) => {
    const rs = results.filter((r) => `${r.fault}|${r.step}` === k);
    const [fault, step] = k.split('|');
    const sum = (f) => rs.reduce((s, r) => s + f(r), 0);
    return {
      fault,
      step,
      runs: rs.length,
      landed: fault === 'none' ? null : sum((r) => (r.landed ? 1 : 0)),
      duplicates: sum((r) => r.duplicates),
      lost: sum((r) => r.lost),
      disagreements: sum((r) => (r.disagreement ? 1 : 0)),
      outside_writes: sum((r) => r.outside_writes),
      unsettled: sum((r) => (r.settled ? 0 : 1)),
      settle_median_s: pct(
        rs.map((r) => r.settle_s),
        50,
      ),
    };
  });
}

async function writeResults(started, results, ctx) {
  const date = started.toISOString().slice(0, 10);
  const out = (ext) => path.join(root, 'faults', 'results', `${values.name ?? date}.${ext}`);
  const command = `npm run faults -- ${process.argv.slice(2).join(' ')}`.trim();
  const machine = { cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model ?? null, node: process.version };
  const summary = summarize(results);
  await mkdir(path.dirname(out('json')), { recursive: true });
  await writeFile(
    out('json'),
    `${JSON.stringify({ started: started.toISOString(), command, runs_per_cell: runsPerCell, actions_per_repair: ctx.actions, machine, summary, results }, null, 2)}\n`,
  );
  const cols = [
    ['fault', 'fault'],
    ['step', 'step'],
    ['runs', 'runs'],
    ['landed', 'landed'],
    ['duplicates', 'duplicates'],
    ['lost', 'lost'],
    ['disagreements', 'disagreements'],
    ['outside_writes', 'outside writes'],
    ['unsettled', 'unsettled'],
    ['settle_median_s', 'median settle s'],
  ];
  const table = [
    `| ${cols.map((c) => c[1]).join(' | ')} |`,
    `| ${cols.map(() => '---').join(' | ')} |`,
    ...summary.map((r) => `| ${cols.map(([k]) => (r[k] === null ? 'n/a' : r[k])).join(' | ')} |`),
  ].join('\n');
  const bad = results.filter((r) => r.duplicates || r.lost || r.disagreement || r.outside_writes);
  const findings = bad.length
    ? bad
        .map(
          (r) =>
            `- ${r.fault} × ${r.step}${r.run ? ` #${r.run}` : ''} (generation ${r.generation}): starts ${r.service_starts}, file writes ${r.file_writes}, lost ${JSON.stringify(r.lost_entries)}, status ${r.status}/${r.reason}, disk ${r.disk_at_desired ? 'at desired' : JSON.stringify(r.disk_why)}, outside ${JSON.stringify(r.outside_paths)}`,
        )
        .join('\n')
    : 'None: every run had 0 duplicates, 0 lost entries, 0 disagreements and 0 writes outside the root.';
  await writeFile(
    out('md'),
    `# Fault injection, ${date}\n\n${machine.cpus} cores (${machine.cpu_model}), Node ${machine.node}. Started ${started.toISOString()}.\n\n    ${command}\n\n` +
      `${runsPerCell} run(s) per cell; each repair is ${ctx.actions} actions (release install, file write, service restart). ` +
      `The "none" row is the control repair, with no fault. Columns and how each step is hit: faults/README.md.\n\n${table}\n\n## Runs that counted something\n\n${findings}\n`,
  );
}

await main().then(
  () => process.exit(0),
  (e) => {
    console.error(`faults: ${e.stack ?? e}`);
    process.exit(1);
  },
);
