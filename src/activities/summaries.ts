import { targetOf, type BoundIntent } from '../domain';

/*
 * What the Temporal Web UI shows for a reconcile loop before anyone opens its history: a
 * one-line summary in the workflow list, and details (markdown) on the workflow's page. Set once
 * when the loop starts (static); what changes while it runs is in its current details and search
 * attributes (src/workflows/attributes.ts). Never the content of a file: a digest at most.
 */

const short = (digest: string) => digest.replace(/^sha256:/, '').slice(0, 12);

/** "N-24 → generation 12 (3f9a…): build 7.4, config, app, maintenance" */
export function reconcileSummary(node: string, intent: BoundIntent): string {
  const resources = Object.entries(intent.resources).map(([key, spec]) =>
    spec.type === 'release' ? `${key} ${spec.version}` : key,
  );
  const line = `${node} → generation ${intent.generation} (${short(intent.digest)}): ${resources.join(', ')}`;
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}

/** The loop's page: what it binds, where it came from, each resource's target, and what to run next. */
export function reconcileDetails(node: string, intent: BoundIntent): string {
  const p = intent.provenance;
  const rows = Object.entries(intent.resources).map(([key, spec]) => `| ${key} | ${spec.type} | \`${targetOf(key, spec)}\` |`);
  return [
    `**${node}** at desired generation **${intent.generation}**`,
    '',
    `- digest: \`${intent.digest}\``,
    `- from: ${p.source}${p.revision ? ` @ ${p.revision}` : ''}${p.author ? ` by ${p.author}` : ''}`,
    `- policy: resync ${intent.policy.resync_interval}, observation TTL ${intent.policy.observation_ttl}, watch ${intent.policy.watch ? 'on' : 'off'}`,
    '',
    '| resource | type | target |',
    '|---|---|---|',
    ...rows,
    '',
    `Inspect: \`datum describe ${node}\` · \`datum ledger ${node}\`. A CONFLICT waits for \`datum resolve ${node} --resource KEY --resolution retake|yield --by NAME\`.`,
  ].join('\n');
}
