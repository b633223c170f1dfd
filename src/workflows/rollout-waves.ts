import {
  CancelledFailure,
  ParentClosePolicy,
  allHandlersFinished,
  condition,
  continueAsNew,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import { TypedSearchAttributes } from '@temporalio/common';
import { durationMs, judgeGateNode, maxUnavailable, waveGate } from '../domain';
import { clip, echo } from '../domain/bounds';
import { ROLLOUT_WAITS } from './patches';
import {
  CONTROL_TASK_QUEUE,
  DatumConditions,
  DatumStatus,
  MAX_HISTORY_EVENTS,
  MEMO_ROLLOUT_CANCELLED,
  MEMO_SUMMARY,
  ROLLOUT_OUTCOMES,
  WORKFLOW_TYPES,
  WORK_ESCALATE_AFTER_DEFAULT,
  gateItemId,
  pauseRolloutUpdate,
  resumeRolloutUpdate,
  rolloutProgressQuery,
  withFix,
  type ControlActivities,
  type GateHalt,
  type LedgerRef,
  type RolloutAct,
  type RolloutCancelled,
  type RolloutGateWorkflow,
  type RolloutInput,
  type RolloutNodeProgress,
  type RolloutProgress,
  type RolloutResult,
  type RolloutWaves,
  type RollbackTarget,
  type WaveNode,
  type WaveProgress,
  type WavesProgress,
  type WorkResolution,
} from '../contract';
import { summaryLine } from './summaries';
import { requester, thisUpdate } from './update-identity';

/*
 * A rollout in waves (docs/operations.md, "A first production change, in waves"). A wave starts
 * when the one before it is settled by the ledger: every node CONVERGED, by a fresh observation,
 * within the gate's deadline. A failed gate halts the rollout and hands the judgement over as a
 * work item (rolloutGate). Loops run as always; a wave only decides which loops start, and when.
 */

const acts = proxyActivities<ControlActivities>({
  startToCloseTimeout: '5m',
  retry: { initialInterval: '1s', maximumAttempts: 5, nonRetryableErrorTypes: ['MisconfiguredWorker'] },
});

/** How often the gate reads the ledger while a wave is on its way. */
const GATE_POLL_MS = 2000;

type Waved = RolloutInput & { waves: RolloutWaves };

interface Run {
  input: Waved;
  p: WavesProgress;
  deadlineMs: number;
  /** What the Web UI shows now (memo summary), to write it only when it changes. */
  shown: string | null;
}

export async function rolloutInWaves(input: Waved): Promise<RolloutResult> {
  const run = openRun(input);
  installHandlers(run);
  try {
    await runWaves(run);
  } catch (error) {
    if (isCancellation(error)) endCancelled(run);
    throw error;
  }
  if (run.p.state === 'running' || run.p.state === 'paused') run.p.state = 'completed';
  publish(run);
  await condition(allHandlersFinished);
  return { generation: input.generation, nodes: nodesOf(run), waves: run.p };
}

function openRun(input: Waved): Run {
  const carried = input.waves_carry && workflowInfo().continuedFromExecutionRunId ? input.waves_carry : null;
  const fresh = (): WavesProgress => ({
    state: 'running',
    current: 0,
    max_unavailable: input.waves.max_unavailable,
    gate_deadline: input.waves.gate_deadline,
    paused: null,
    pauses: [],
    halts: [],
    rollback: null,
    waves: input.waves.waves.map((w) => ({
      name: w.name,
      generation: input.generation,
      state: 'pending',
      started_at: null,
      ended_at: null,
      nodes: w.nodes.map(notStarted),
    })),
  });
  return { input, p: carried ?? fresh(), deadlineMs: durationMs(input.waves.gate_deadline), shown: null };
}

const notStarted = (node: string): WaveNode => ({
  node,
  state: 'not_started',
  workflow_id: null,
  digest: null,
  started_at: null,
  handed_over_from: [],
  why: null,
  entry: null,
});

const nowIso = () => new Date(Date.now()).toISOString();
const done = (p: WavesProgress) => p.state === 'completed' || p.state === 'aborted' || p.state === 'rolled_back';

async function runWaves(run: Run): Promise<void> {
  const { p } = run;
  while (p.current < p.waves.length && !done(p)) {
    const wave = p.waves[p.current];
    const gate = await runWave(run, wave);
    if (wave.name === ROLLBACK_WAVE) return;
    if (gate === 'passed') {
      wave.state = 'passed';
      p.current++;
      continue;
    }
    const { resolution, rollback } = await halt(run, wave);
    if (resolution.resolution === 'continue') {
      wave.state = 'continued';
      p.current++;
    } else if (resolution.resolution === 'rollback') await rollBack(run, resolution, rollback);
    else {
      p.state = 'aborted';
      for (const later of p.waves.slice(p.current + 1)) later.state = 'stopped';
    }
    publish(run);
  }
}

// ---------------------------------------------------------------------------------------------
// One wave: start its nodes (at most max_unavailable on their way at once), judge the gate.

async function runWave(run: Run, wave: WaveProgress): Promise<'passed' | 'failed'> {
  if (wave.state === 'pending') {
    wave.state = 'running';
    wave.started_at = nowIso();
  }
  const cap = maxUnavailable(run.p.max_unavailable, wave.nodes.length);
  for (;;) {
    await condition(() => run.p.paused === null);
    await startMore(wave, cap);
    await judge(run, wave);
    const gate = waveGate(wave.nodes.map((n) => ({ verdict: n.state === 'not_started' ? 'unstarted' : n.state })));
    publish(run);
    if (gate !== 'waiting') {
      wave.ended_at = nowIso();
      return gate;
    }
    await continueAsNewIfDue(run);
    await condition(() => run.p.paused !== null, GATE_POLL_MS);
  }
}

const failing = (n: WaveNode) => n.state === 'settled' || n.state === 'late' || n.state === 'refused';

/** Starts the wave's next nodes, unless one of it already failed (the blast radius stops growing). */
async function startMore(wave: WaveProgress, cap: number): Promise<void> {
  if (wave.nodes.some(failing)) return;
  const room = cap - wave.nodes.filter((n) => n.state !== 'not_started' && n.state !== 'converged').length;
  const next = wave.nodes.filter((n) => n.state === 'not_started').slice(0, Math.max(0, room));
  if (next.length === 0) return;
  const names = next.map((n) => n.node);
  const prepared = await acts.prepareRolloutNodes.executeWithOptions(
    { summary: summaryLine(`${wave.name}: start generation ${wave.generation} on ${names.join(', ')}`) },
    [{ generation: wave.generation, nodes: names }],
  );
  const at = nowIso();
  for (const n of next) {
    const p = prepared.find((x) => x.node === n.node);
    if (!p || p.outcome === 'refused') Object.assign(n, { state: 'refused', why: p?.error ?? 'not prepared', started_at: at });
    else
      Object.assign(n, {
        state: 'waiting',
        workflow_id: p.workflow_id,
        digest: p.digest,
        started_at: at,
        handed_over_from: p.handed_over_from,
      });
  }
}

/** The gate's verdict on each started node, from its loop's latest recorded decision. */
async function judge(run: Run, wave: WaveProgress): Promise<void> {
  const started = wave.nodes.filter((n) => n.workflow_id !== null && n.state !== 'refused');
  if (started.length === 0) return;
  const evidence = await acts.gateEvidence.executeWithOptions(
    { summary: summaryLine(`${wave.name}: the gate reads ${started.length} node(s) from the ledger`) },
    [{ generation: wave.generation, nodes: started.map((n) => ({ node: n.node, workflow_id: n.workflow_id! })) }],
  );
  const nowMs = Date.now();
  for (const n of started) {
    const entry = evidence.find((e) => e.node === n.node)?.entry ?? null;
    const verdict = judgeGateNode(
      entry,
      { generation: wave.generation, digest: n.digest ?? '' },
      { startedAtMs: Date.parse(n.started_at!), deadlineMs: run.deadlineMs, nowMs },
      ROLLOUT_WAITS,
    );
    Object.assign(n, { state: verdict.verdict, why: verdict.why, entry });
  }
}

// ---------------------------------------------------------------------------------------------
// A failed gate: the rollout halts, and the judgement is handed over as work.

async function halt(run: Run, wave: WaveProgress): Promise<{ resolution: WorkResolution; rollback: RollbackTarget[] }> {
  const { p, input } = run;
  wave.state = 'halted';
  p.state = 'halted';
  const rolloutId = workflowInfo().workflowId;
  const startedNodes = p.waves
    .slice(0, p.current + 1)
    .flatMap((w) => w.nodes)
    .filter((n) => n.workflow_id !== null);
  const rollback = await acts.rollbackPlan.executeWithOptions(
    { summary: summaryLine(`what a rollback of ${startedNodes.length} node(s) would write`) },
    [{ generation: input.generation, nodes: startedNodes.map((n) => ({ node: n.node, handed_over_from: n.handed_over_from })) }],
  );
  const bad = wave.nodes.filter(failing);
  const halted: GateHalt = {
    rollout: rolloutId,
    generation: input.generation,
    wave: p.current,
    wave_name: wave.name,
    failing: bad.map((n) => ({ node: n.node, state: n.state, why: n.why, workflow_id: n.workflow_id })),
    later_waves: p.waves.slice(p.current + 1).map((w) => ({ name: w.name, nodes: w.nodes.map((n) => n.node) })),
    rollback,
  };
  const id = gateItemId(rolloutId, p.current);
  p.halts.push({ wave: p.current, item: id, at: nowIso(), resolution: null, resolved: null });
  publish(run);
  const item = await openGate(id, halted, bad);
  const r = item.resolution!;
  const record = p.halts[p.halts.length - 1];
  record.resolution = r.resolution as 'continue' | 'abort' | 'rollback';
  record.resolved = { by: r.by, identity: r.identity, at: r.at, note: r.note };
  p.state = p.paused ? 'paused' : 'running';
  // The rollback the resolver saw in the item is the one carried out, not one planned again.
  return { resolution: r, rollback: item.gate?.rollback ?? rollback };
}

async function openGate(id: string, halted: GateHalt, bad: WaveNode[]) {
  const ledger: LedgerRef[] = bad
    .filter((n) => n.entry !== null)
    .map((n) => ({
      node: n.node,
      seq: n.entry!.seq,
      decided_at: n.entry!.decided_at,
      status: n.entry!.status,
      reason: n.entry!.reason,
      reason_detail: n.entry!.reason_detail,
    }));
  const child = await startChild<RolloutGateWorkflow>(WORKFLOW_TYPES.rolloutGate, {
    workflowId: id,
    taskQueue: CONTROL_TASK_QUEUE,
    args: [{ halt: halted, ledger, escalate_after: WORK_ESCALATE_AFTER_DEFAULT }],
    parentClosePolicy: ParentClosePolicy.TERMINATE,
    staticSummary: `work: rollout halted at ${halted.wave_name} (generation ${halted.generation})`,
    memo: { [MEMO_SUMMARY]: `OPEN: ${halted.rollout} halted at ${halted.wave_name}` },
    typedSearchAttributes: new TypedSearchAttributes([
      { key: DatumConditions, value: ['ROLLOUT_HALTED'] },
      { key: DatumStatus, value: 'OPEN' },
    ]),
  });
  return await child.result();
}

const ROLLBACK_WAVE = 'rollback';

/**
 * Writes, for every node this rollout started, the generation after it with the content its loop
 * had before (the authority's file says so, and who asked), and rolls that out as one last wave,
 * judged by the same gate; no later wave starts.
 */
async function rollBack(run: Run, r: WorkResolution, targets: RollbackTarget[]): Promise<void> {
  const { p, input } = run;
  const record = p.halts[p.halts.length - 1];
  const act: RolloutAct = { by: r.by, identity: r.identity, at: r.at, note: r.note };
  const nodes = await acts.writeRollback.executeWithOptions(
    { summary: summaryLine(`roll back ${targets.length} node(s), asked by ${r.by}`) },
    [{ rollout: workflowInfo().workflowId, item: record.item, generation: input.generation, targets, act }],
  );
  p.rollback = { ...act, nodes };
  for (const later of p.waves.slice(p.current + 1)) later.state = 'stopped';
  const written = nodes.filter((n) => n.outcome === 'written');
  p.state = 'rolled_back';
  if (written.length === 0) return;
  p.waves.push({
    name: ROLLBACK_WAVE,
    generation: input.generation + 1,
    state: 'running',
    started_at: nowIso(),
    ended_at: null,
    nodes: written.map((n) => notStarted(n.node)),
  });
  p.current = p.waves.length - 1;
  const gate = await runWave(run, p.waves[p.current]);
  p.waves[p.current].state = gate === 'passed' ? 'passed' : 'halted';
}

// ---------------------------------------------------------------------------------------------
// What the rollout shows: its progress query, pause and resume, the Web UI, and the result.

function installHandlers(run: Run): void {
  setHandler(rolloutProgressQuery, () => progressOf(run));
  const validate = (payload: unknown, want: 'running' | 'paused') => {
    const problem = pausePayloadProblem(payload);
    if (problem) throw new Error(problem);
    if (done(run.p)) throw new Error(withFix(`the rollout has ended (${run.p.state})`, 'there is nothing to pause or resume'));
    if (want === 'running' && run.p.paused)
      throw new Error(withFix(`the rollout is already paused by ${run.p.paused.by} since ${run.p.paused.at}`, 'resume it first'));
    if (want === 'paused' && !run.p.paused) throw new Error(withFix('the rollout is not paused', 'nothing to resume'));
  };
  setHandler(
    pauseRolloutUpdate,
    async (payload) => {
      const act: RolloutAct = { by: payload.by, identity: null, at: nowIso(), note: payload.note ?? null };
      run.p.paused = act;
      run.p.pauses.push({ paused: act, resumed: null });
      if (run.p.state === 'running') run.p.state = 'paused';
      publish(run);
      act.identity = await requester(thisUpdate());
      return progressOf(run);
    },
    { validator: (payload) => validate(payload, 'running') },
  );
  setHandler(
    resumeRolloutUpdate,
    async (payload) => {
      const act: RolloutAct = { by: payload.by, identity: null, at: nowIso(), note: payload.note ?? null };
      const pause = run.p.pauses[run.p.pauses.length - 1];
      if (pause) pause.resumed = act;
      run.p.paused = null;
      if (run.p.state === 'paused') run.p.state = run.p.halts.some((h) => h.resolution === null) ? 'halted' : 'running';
      publish(run);
      act.identity = await requester(thisUpdate());
      return progressOf(run);
    },
    { validator: (payload) => validate(payload, 'paused') },
  );
}

const progressOf = (run: Run): RolloutProgress => ({ generation: run.input.generation, nodes: nodesOf(run), waves: run.p });

function pausePayloadProblem(payload: unknown): string | null {
  const p = payload as { by?: unknown; note?: unknown } | null;
  if (!p || typeof p !== 'object' || Object.keys(p).some((k) => k !== 'by' && k !== 'note'))
    return withFix(`payload ${echo(payload)} is not {"by": …, "note": …}`, 'send {"by": "alice"}');
  if (typeof p.by !== 'string' || p.by.trim() === '' || p.by.length > 200)
    return withFix(`by ${echo(p.by)} must name who asks (1 to 200 characters)`, 'say who you are, such as "oncall"');
  if (p.note !== undefined && p.note !== null && (typeof p.note !== 'string' || p.note.length > 2000))
    return withFix('note must be text of at most 2000 characters', 'say why in a sentence or two');
  return null;
}

/** Each node as its last wave left it (a rolled-back node: the rollback wave's). */
function nodesOf(run: Run): RolloutNodeProgress[] {
  const last = new Map<string, { wave: WaveProgress; n: WaveNode }>();
  for (const wave of run.p.waves) for (const n of wave.nodes) last.set(n.node, { wave, n });
  return run.input.nodes.map((node): RolloutNodeProgress => {
    const found = last.get(node);
    if (!found) return { node, outcome: ROLLOUT_OUTCOMES.not_started, wave: '-' };
    const { wave, n } = found;
    if (n.state === 'not_started') return { node, outcome: ROLLOUT_OUTCOMES.not_started, wave: wave.name };
    if (n.state === 'refused') return { node, outcome: ROLLOUT_OUTCOMES.refused, error: n.why ?? 'refused' };
    if (!n.entry || n.state === 'waiting')
      return { node, outcome: ROLLOUT_OUTCOMES.pending, workflow_id: n.workflow_id!, handed_over_from: n.handed_over_from };
    return {
      node,
      outcome: ROLLOUT_OUTCOMES.reported,
      workflow_id: n.workflow_id!,
      status: n.entry.status,
      reason: n.entry.reason,
      reason_detail: n.entry.reason_detail,
      handed_over_from: n.handed_over_from,
    };
  });
}

/** The memo's one line (the Web UI's list) and the page's details, written only when they change. */
function publish(run: Run): void {
  const { p } = run;
  const wave = p.waves[Math.min(p.current, p.waves.length - 1)];
  const open = p.halts.find((h) => h.resolution === null);
  const summary = summaryLine(
    `${p.state.toUpperCase()}: ${wave.name} (${Math.min(p.current + 1, p.waves.length)}/${p.waves.length}) of generation ${wave.generation}${open ? ` — ${open.item}` : ''}${p.paused ? ` — paused by ${p.paused.by}` : ''}`,
  );
  if (summary !== run.shown) {
    upsertMemo({ [MEMO_SUMMARY]: summary });
    run.shown = summary;
  }
  setCurrentDetails(
    [
      `**${p.state}** — gate: CONVERGED by a fresh observation within ${p.gate_deadline}; max unavailable ${p.max_unavailable ?? 'the whole wave'}`,
      '',
      '| wave | gen | state | nodes |',
      '|---|---|---|---|',
      ...p.waves.map(
        (w) =>
          `| ${w.name} | ${w.generation} | ${w.state} | ${clip(w.nodes.map((n) => `${n.node}: ${n.state}`).join(', '), 400)} |`,
      ),
      ...(open ? ['', `Halted: \`datum work show ${open.item}\``] : []),
    ].join('\n'),
  );
}

async function continueAsNewIfDue(run: Run): Promise<void> {
  const info = workflowInfo();
  if (!(info.continueAsNewSuggested || info.historyLength > MAX_HISTORY_EVENTS)) return;
  await condition(allHandlersFinished);
  await continueAsNew<(input: RolloutInput) => Promise<RolloutResult>>({ ...run.input, waves_carry: run.p });
}

/** Cancelled (`datum rollout cancel`): the memo says which nodes it started (their loops go on) and which it never did. */
function endCancelled(run: Run): never {
  const nodes = run.p.waves.flatMap((w) => w.nodes);
  const cancelled: RolloutCancelled = {
    at: nowIso(),
    started: nodes.filter((n) => n.workflow_id !== null).map((n) => n.node),
    refused: nodes.filter((n) => n.state === 'refused').map((n) => n.node),
    not_started: nodes.filter((n) => n.state === 'not_started').map((n) => n.node),
  };
  upsertMemo({ [MEMO_ROLLOUT_CANCELLED]: cancelled });
  throw new CancelledFailure('rollout cancelled');
}
