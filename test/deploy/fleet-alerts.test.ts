import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { projectRoot } from '../../src/worker/paths';
import { INSTALL_TIMEOUT_MS, PROMETHEUS, toolOrSkip } from '../helpers/tools';

/*
 * The blind-fleet alerts of deploy/prometheus/alerts.yml, evaluated by Prometheus's own rule engine
 * (`promtool test rules`, the release docker-compose.yml runs) over series as a controller worker
 * exports them: DatumFleetUnwatched fires when the fleet workflow's last look is overdue and stays
 * quiet while it looks every interval; DatumControlNotPolled fires when no controller polls
 * datum-control (or none is up) and stays quiet while one polls. The metric itself is checked on a
 * real worker's /metrics by observability.test.ts.
 */

const ALERTS_FILE = path.join(projectRoot(), 'deploy', 'prometheus', 'alerts.yml');
const scratch = mkdtempSync(path.join(os.tmpdir(), 'datum-fleet-alerts-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const NS = 'namespace="default"';
const WORKER = 'job="datum-worker", instance="w1:9464"';
const POLLS = `temporal_long_request{${WORKER}, operation="PollWorkflowTaskQueue", task_queue="datum-control", ${NS}}`;

/** One promtool test: series sampled every minute, and the alerts expected firing at `at`. */
interface Case {
  name: string;
  series: Record<string, string>;
  at: string;
  alert: 'DatumFleetUnwatched' | 'DatumControlNotPolled';
  fires: boolean;
  /** The summary as Prometheus renders it, when it fires. */
  summary?: string;
}

/** A rule's description, as alerts.yml has it (promtool compares the annotations too). */
function description(alert: string): string {
  const doc = parse(readFileSync(ALERTS_FILE, 'utf8')) as {
    groups: { rules: { alert?: string; annotations?: Record<string, string> }[] }[];
  };
  return doc.groups.flatMap((g) => g.rules).find((r) => r.alert === alert)!.annotations!.description;
}

/** A controller that looks every 60 s (the gauge holds each look's Unix time) and polls all along. */
const healthy: Record<string, string> = {
  [`datum_fleet_last_look_timestamp_seconds{${WORKER}, ${NS}}`]: '0+60x30',
  [`datum_fleet_look_interval_seconds{${WORKER}, ${NS}}`]: '60x30',
  [POLLS]: '0+2x30',
  [`up{${WORKER}}`]: '1x30',
};

const CASES: Case[] = [
  { name: 'looked at every interval', series: healthy, at: '25m', alert: 'DatumFleetUnwatched', fires: false },
  {
    name: 'the last look stopped at 5m (the fleet workflow stuck, or Temporal away)',
    series: { ...healthy, [`datum_fleet_last_look_timestamp_seconds{${WORKER}, ${NS}}`]: '0+60x5 300x25' },
    at: '25m',
    alert: 'DatumFleetUnwatched',
    fires: true,
    summary: 'the fleet was last looked at 20m 0s ago',
  },
  {
    name: 'a look 2 minutes old is within two 60 s intervals and 30 s',
    series: { ...healthy, [`datum_fleet_last_look_timestamp_seconds{${WORKER}, ${NS}}`]: '0+60x20 1200x10' },
    at: '22m',
    alert: 'DatumFleetUnwatched',
    fires: false,
  },
  { name: 'a controller polls datum-control', series: healthy, at: '25m', alert: 'DatumControlNotPolled', fires: false },
  {
    name: 'the controller is up and polls nothing since 5m',
    series: { ...healthy, [POLLS]: '0+2x5 10x25' },
    at: '25m',
    alert: 'DatumControlNotPolled',
    fires: true,
    summary: 'no controller worker polls datum-control',
  },
  {
    name: 'no controller worker is up',
    series: { [`up{${WORKER}}`]: '0x30' },
    at: '25m',
    alert: 'DatumControlNotPolled',
    fires: true,
    summary: 'no controller worker polls datum-control',
  },
];

/** Runs one case through promtool; its output when the engine disagrees with the expectation. */
function promtoolTest(promtool: string, c: Case): { status: number | null; output: string } {
  const file = path.join(scratch, `${c.alert}-${CASES.indexOf(c)}.test.yml`);
  const test = {
    rule_files: [ALERTS_FILE],
    evaluation_interval: '1m',
    tests: [
      {
        interval: '1m',
        input_series: Object.entries(c.series).map(([series, values]) => ({ series, values })),
        alert_rule_test: [
          {
            eval_time: c.at,
            alertname: c.alert,
            exp_alerts: c.fires
              ? [
                  {
                    exp_labels: { severity: 'critical' },
                    exp_annotations: { summary: c.summary, description: description(c.alert) },
                  },
                ]
              : [],
          },
        ],
      },
    ],
  };
  writeFileSync(file, stringify(test));
  const run = spawnSync(promtool, ['test', 'rules', '--debug', file], { encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe(`the blind-fleet alerts under promtool ${PROMETHEUS.release}`, () => {
  for (const c of CASES)
    it(`${c.alert} ${c.fires ? 'fires' : 'stays quiet'}: ${c.name}`, { timeout: INSTALL_TIMEOUT_MS }, async (ctx) => {
      const promtool = await toolOrSkip(ctx, 'promtool');
      const { status, output } = promtoolTest(promtool, c);
      expect(status, output).toBe(0);
    });

  it('the check can fail: expecting the opposite of each case fails', { timeout: INSTALL_TIMEOUT_MS }, async (ctx) => {
    const promtool = await toolOrSkip(ctx, 'promtool');
    for (const c of CASES) expect(promtoolTest(promtool, { ...c, fires: !c.fires }).status, c.name).not.toBe(0);
  });
});
