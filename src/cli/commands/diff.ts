import { openLedgerStore } from '../../activities/ledger-store';
import { DesiredStateAuthority } from '../../activities/authority';
import {
  classify,
  durationMs,
  emptyHistory,
  planItems,
  type Assessment,
  type BoundIntent,
  type History,
  type Json,
  type LedgerEntry,
  type Observation,
  type PlanItem,
} from '../../domain';
import { outputFormat, wholeFlag, type OutputFlags, type OutputFormat } from '../args';
import { withFix } from '../errors';
import { checkNode } from '../nodes';
import { ago, print, printDocument, printLine, short, table } from '../output';
import type { CommandModule } from '../command';
import { dataDirFrom, fleetDirFrom } from '../dirs';

/*
 * `datum diff NODE`: what a rollout of the authority's generation would do to a node, planned by
 * the domain's own classify() and planItems() from the node's last fresh observation in the
 * ledger store. No Temporal and no agent: the snapshot is the one a pass last judged.
 */

interface DiffRaw extends OutputFlags {
  node: string;
  generation?: string;
  fleet?: string;
  data?: string;
}

export interface DiffInput {
  node: string;
  generation: number | null;
  fleetDir: string;
  dataDir: string;
  format: OutputFormat;
}

/** A snapshot rebuilt from a ledger entry: what the pass that recorded it saw. */
interface Snapshot {
  entry: LedgerEntry;
  observedAt: string;
  observation: Observation;
  history: History;
}

export interface DiffRow {
  resource_key: string;
  type: string | null;
  ownership: string;
  mode: string;
  drift: boolean;
  desired: Json;
  observed: Json;
  action: string | null;
  /** Why nothing is planned, or why the planned action would not be applied. */
  note: string;
}

export interface DiffReport {
  node: string;
  generation: number;
  desired_digest: string;
  observed_at: string;
  observation_ttl: string;
  stale: boolean;
  from_entry: { seq: number; workflow_id: string; decided_at: string; desired_generation: number };
  resources: DiffRow[];
  changes: number;
}

export const diffCommand: CommandModule<DiffRaw, DiffInput> = {
  input(values) {
    return {
      node: checkNode(values.node),
      generation: values.generation === undefined ? null : wholeFlag(values.generation, '--generation', '12'),
      fleetDir: fleetDirFrom(values.fleet),
      dataDir: dataDirFrom(values.data),
      format: outputFormat(values),
    };
  },
  async run({ node, generation, fleetDir, dataDir, format }) {
    const read = await new DesiredStateAuthority(fleetDir).read(node);
    if (!read.ok) throw new Error(read.error);
    if (generation !== null && read.intent.generation !== generation)
      throw new Error(
        withFix(
          `the authority for ${node} is at generation ${read.intent.generation}, not ${generation}: a rollout of ${generation} would refuse the node`,
          `commit generation ${generation} to ${fleetDir}/desired/nodes/${node}.yaml, or diff generation ${read.intent.generation}`,
        ),
      );
    const snapshot = await lastFreshSnapshot(node, dataDir);
    const report = diffOf(read.intent, snapshot);
    if (format === 'json') printDocument('json', report);
    else if (format === 'jsonl') for (const r of report.resources) printLine({ node, ...r });
    else printReport(report);
    return report.changes > 0 ? 1 : 0;
  },
};

async function lastFreshSnapshot(node: string, dataDir: string): Promise<Snapshot> {
  const store = await openLedgerStore({ dataDir });
  try {
    const entries = await store.list(node);
    const entry = [...entries].reverse().find((e) => e.observation_fresh && e.observed_at && e.mode);
    if (!entry)
      throw new Error(
        withFix(
          `the ledger at ${store.location} has no fresh observation of ${node}`,
          `roll the node out once (in observe mode, nothing is applied), or point --data / DATUM_LEDGER_URL at the fleet's ledger`,
        ),
      );
    return snapshotOf(entry);
  } finally {
    await store.close();
  }
}

/** The observation and the operator decisions a ledger entry records, as classify() takes them. */
export function snapshotOf(entry: LedgerEntry): Snapshot {
  // After a repair, the fresh post-action probe is the newer snapshot.
  const post = entry.post_action_observation as { observed_at?: string; resources?: Record<string, { value: Json }> } | null;
  const observedAt = post?.observed_at ?? entry.observed_at!;
  const mode = entry.mode ?? 'observe';
  const observation: Observation = {
    node_id: entry.node_id,
    observed_at: observedAt,
    heartbeat_at: null,
    mode,
    resource_modes: {},
    overrides: {},
    resources: {},
    undeclared: [],
    config_error: null,
    protections: {},
    decisions: {},
    fence_reset: null,
  };
  const history = emptyHistory();
  const str = (v: Json | undefined) => (typeof v === 'string' ? v : '');
  for (const r of entry.resources) {
    const value = post?.resources?.[r.resource_key]?.value ?? r.observed;
    if (r.effective_mode === 'observe' && mode === 'enforce') observation.resource_modes[r.resource_key] = 'observe';
    const provenance = (r.ownership_provenance ?? {}) as Record<string, Json>;
    if (r.ownership === 'OPERATOR_OWNED' && provenance.via === 'resolveConflict')
      history.yielded[r.resource_key] = {
        by: str(provenance.approved_by),
        note: str(provenance.reason),
        at: str(provenance.since),
      };
    else if (r.ownership === 'OPERATOR_OWNED')
      observation.overrides[r.resource_key] = {
        approved_by: str(provenance.approved_by),
        reason: str(provenance.reason),
        since: str(provenance.since),
      };
    if (!r.type) continue;
    if (r.desired === null && r.ownership === 'UNKNOWN')
      observation.undeclared.push({ resource_key: r.resource_key, type: r.type, value, marker: null });
    else observation.resources[r.resource_key] = { type: r.type, value, marker: null, obstruction: null, detail: {} };
  }
  return { entry, observedAt, observation, history };
}

export function diffOf(intent: BoundIntent, snapshot: Snapshot, now = Date.now()): DiffReport {
  const assessments = classify(intent, snapshot.observation, snapshot.history);
  const planned = new Map(planItems(intent, assessments, 0, snapshot.observedAt).map((p) => [p.action.resource_key, p]));
  const resources = assessments.map((a) =>
    rowOf(a, planned.get(a.resource_key), snapshot.observation.resources[a.resource_key] !== undefined),
  );
  const ttl = intent.policy.observation_ttl;
  return {
    node: intent.node,
    generation: intent.generation,
    desired_digest: intent.digest,
    observed_at: snapshot.observedAt,
    observation_ttl: ttl,
    stale: now - Date.parse(snapshot.observedAt) > durationMs(ttl),
    from_entry: {
      seq: snapshot.entry.seq,
      workflow_id: snapshot.entry.workflow_id,
      decided_at: snapshot.entry.decided_at,
      desired_generation: snapshot.entry.desired_generation,
    },
    resources,
    changes: resources.filter((r) => r.action !== null).length,
  };
}

function rowOf(a: Assessment, item: PlanItem | undefined, seen: boolean): DiffRow {
  const base = {
    resource_key: a.resource_key,
    type: a.type,
    ownership: a.ownership,
    mode: a.effective_mode,
    drift: a.drift,
    desired: a.desired,
    observed: a.observed?.value ?? null,
  };
  if (item) {
    const note = item.action.destructive
      ? `withheld: ${item.action.withheld_because ?? 'destructive'}`
      : a.effective_mode === 'observe'
        ? 'observe mode: planned and recorded as DRIFTED, not applied'
        : 'would be applied';
    return { ...base, action: item.action.action, note };
  }
  const note =
    a.ownership === 'OPERATOR_OWNED'
      ? `operator-owned (${a.ownership_reason}): never changed`
      : a.ownership === 'UNKNOWN'
        ? !seen && a.spec
          ? 'new in this generation: not observed yet, so ownership is not proven until the first pass'
          : `ownership not proven (${a.ownership_reason}): never touched`
        : 'at desired';
  return { ...base, action: null, note };
}

function printReport(r: DiffReport): void {
  print(
    `${r.node}: generation ${r.generation} (${r.desired_digest.slice(0, 19)}…) against the observation of ${r.observed_at} (${ago(r.observed_at)}, ledger seq ${r.from_entry.seq} of ${r.from_entry.workflow_id})`,
  );
  if (r.stale)
    print(
      `\nSTALE: that observation is older than observation_ttl (${r.observation_ttl}). A rollout observes the node again before it acts; what it does follows that fresh snapshot, which may differ from this plan.`,
    );
  print(
    `\n${table(
      ['RESOURCE', 'TYPE', 'OWNERSHIP', 'MODE', 'ACTION', 'DESIRED', 'OBSERVED', 'WHY'],
      r.resources.map((x) => [
        x.resource_key,
        x.type ?? '-',
        x.ownership,
        x.mode,
        x.action ?? '-',
        short(x.desired, 30),
        short(x.observed, 30),
        x.note,
      ]),
    )}`,
  );
  print(r.changes === 0 ? '\nNothing would change.' : `\n${r.changes} resource(s) would change.`);
}
