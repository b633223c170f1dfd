import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { defaultPayloadConverter } from '@temporalio/common';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { WebUiView } from '../../src/cli/commands/webui-view';
import { projectRoot } from '../../src/worker/paths';
import {
  CONTROL_TASK_QUEUE,
  DATUM_SEARCH_ATTRIBUTES,
  DatumConditions,
  MEMO_SUMMARY,
  WORKFLOW_TYPES,
  reconcileWorkflowId,
  rolloutWorkflowId,
  outcomeWords,
  stateQuery,
  type NodeState,
  type RolloutWorkflow,
} from '../../src/contract';
import { Stack } from '../helpers/stack';
import { CHROMIUM_ARGS, CHROMIUM_PATH, ensureChromium } from './chromium';

/*
 * What a person sees in the Temporal Web UI of a dev server running Datum, started the way
 * `datum rollout start` starts it: the workflow list with the Datum columns and saved views that
 * `datum webui-view` installs, each loop's static summary and details, a timeline and an event
 * history whose activities and timers say what the loop did ("observe W-1", "apply file.write
 * config", "backoff 1/3", "resync"), its search attributes, memo, and the `state` query.
 * Debian's Chromium, driven by playwright-core. Screenshots go to test-artifacts/webui/
 * (git-ignored); a failing step leaves failure-*.png.
 */

const run = promisify(execFile);
const NODES = ['W-1', 'W-2', 'W-3'] as const;
// W-3's release reports the old build after every install: each repair fails its probe (RETRY,
// with a backoff between attempts) until the retry budget is spent (BLOCKED).
const [NODE, , BROKEN] = NODES;
const WORKFLOW_ID = reconcileWorkflowId(NODE, 1);
const BROKEN_ID = reconcileWorkflowId(BROKEN, 1);
const ROLLOUT_ID = rolloutWorkflowId(1, [...NODES]);
// One pass, then a resync timer still running while the pages are open: a history the UI shows
// on one page.
const POLICY = { resync_interval: '10m', retry_budget: 3 };
const SHOTS = path.join(projectRoot(), 'test-artifacts', 'webui');

let stack: Stack;
let browser: Browser;
let page: Page;
let state: NodeState;
let view: WebUiView;

/** `datum` as a person runs it: bin/datum.js in a child process. */
async function datum(args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [path.join(projectRoot(), 'bin', 'datum.js'), ...args]);
  return stdout;
}

async function startStack(): Promise<void> {
  stack = await Stack.start({ ui: true });
  await stack.startController();
  const broken = await stack.fleet.artifact('7.4', '7.3');
  for (const node of NODES) {
    await stack.fleet.writeDesired(node, 1, node === BROKEN ? { artifact: broken.name, policy: POLICY } : { policy: POLICY });
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    await stack.startAgent(node);
  }
  // The rollout starts each loop with its static summary and details, as `datum rollout start` does.
  const result = await stack.client.workflow.execute<RolloutWorkflow>(WORKFLOW_TYPES.rollout, {
    taskQueue: CONTROL_TASK_QUEUE,
    workflowId: ROLLOUT_ID,
    args: [{ generation: 1, nodes: [...NODES] }],
  });
  expect(Object.fromEntries(result.nodes.map((n) => [n.node, outcomeWords(n).status]))).toEqual({
    'W-1': 'CONVERGED',
    'W-2': 'CONVERGED',
    'W-3': 'BLOCKED',
  });
  state = await stack.client.workflow.getHandle(WORKFLOW_ID).query(stateQuery);
  // Visibility is eventually consistent: wait until the list the UI shows has caught up.
  const query = `(DatumStatus="CONVERGED" AND DatumNode IN ("W-1", "W-2")) OR (DatumStatus="BLOCKED" AND DatumNode="W-3")`;
  const deadline = Date.now() + 20_000;
  while ((await stack.client.workflow.count(query)).count < NODES.length) {
    if (Date.now() > deadline) throw new Error(`visibility never showed W-1, W-2 CONVERGED and W-3 BLOCKED (${query})`);
    await new Promise((r) => setTimeout(r, 200));
  }
  view = JSON.parse(await datum(['webui-view', '--ui-url', stack.uiUrl, '-o', 'json'])) as WebUiView;
}

beforeAll(async () => {
  // The first run on a machine installs Chromium with apt (minutes, hence the hook's timeout).
  await fs.rm(SHOTS, { recursive: true, force: true });
  await Promise.all([ensureChromium(), startStack(), fs.mkdir(SHOTS, { recursive: true })]);
  // launch() gives every browser a fresh temporary profile (user-data dir) and removes it on close.
  browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS });
  page = await newPage();
}, 600_000);

/** A page of a fresh browser context: its own localStorage, so no saved view or column yet. */
async function newPage(): Promise<Page> {
  const p = await (await browser.newContext({ viewport: { width: 1760, height: 1000 } })).newPage();
  p.setDefaultTimeout(20_000);
  // The UI fetches a news feed from the internet; this machine has none, so stay on the dev server.
  const ui = stack.uiUrl;
  await p.route(
    (url) => url.origin !== ui,
    (route) => route.abort(),
  );
  return p;
}

beforeEach((ctx) => {
  ctx.onTestFailed(async () => {
    await page?.screenshot({
      path: path.join(SHOTS, `failure-${ctx.task.name.replace(/\W+/g, '-').slice(0, 60)}.png`),
      fullPage: true,
    });
  });
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

const workflowUrl = (id: string) => `${stack.uiUrl}/namespaces/default/workflows/${encodeURIComponent(id)}`;
const listUrl = (query: string) => `${stack.uiUrl}/namespaces/default/workflows?query=${encodeURIComponent(query)}`;
const shot = (name: string, p: Page = page) => p.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

/**
 * Clicks a bookmark whose URL is `bookmarklet`: a navigation the browser starts, so the page's
 * Content-Security-Policy (which forbids inline script) does not apply, as for a person's bookmark.
 * Such a navigation never commits a document of its own, hence ERR_ABORTED.
 */
async function clickBookmarklet(p: Page, bookmarklet: string): Promise<void> {
  await p.goto(bookmarklet).catch((error: Error) => {
    if (!/ERR_ABORTED/.test(error.message)) throw error;
  });
}

const workflowsTable = (p: Page = page) => p.getByRole('table', { name: 'Workflows' });

/** The list's column headers as shown, without the selection and actions columns. */
async function columnHeaders(): Promise<string[]> {
  const headers = await workflowsTable().getByRole('columnheader').allInnerTexts();
  return headers.map((h) => h.trim()).filter((h) => h !== '' && h !== 'Select all Workflows');
}

/** The cells of the list's row for `workflowId`, keyed by column header. */
async function rowCells(workflowId: string): Promise<Record<string, string>> {
  const table = workflowsTable();
  const row = table
    .getByRole('row')
    .filter({ has: page.getByRole('link', { name: workflowId, exact: true }) })
    .first();
  await row.waitFor();
  const headers = await table.getByRole('columnheader').allInnerTexts();
  const cells = await row.getByRole('cell').allInnerTexts();
  return Object.fromEntries(headers.map((h, i) => [h.trim(), (cells[i] ?? '').trim()]));
}

/** The workflow ids the list shows. */
async function listedIds(): Promise<string[]> {
  const rows = await workflowsTable().getByRole('row').all();
  const ids = await Promise.all(rows.map(async (r) => (await r.getByRole('cell').allInnerTexts())[3]?.trim()));
  return ids.filter((id): id is string => Boolean(id)).sort();
}

/** The saved views the menu of the Saved Views bar offers; `current` names its button (the active view). */
async function savedViewNames(current: string): Promise<string[]> {
  await page.getByRole('group', { name: 'Saved Views' }).getByRole('button', { name: current, exact: true }).click();
  const names = await page.getByRole('menu').getByRole('menuitem').allInnerTexts();
  await page.keyboard.press('Escape');
  return names.map((n) => n.trim()).filter((n) => n !== '' && n !== 'Search');
}

/** The JSON a tab shows in its code view (a CodeMirror editor, role textbox). */
async function codeJson(codeView: Locator): Promise<unknown> {
  await codeView.waitFor();
  return JSON.parse(await codeView.innerText()) as unknown;
}

async function openWorkflow(id: string): Promise<Locator> {
  await page.goto(workflowUrl(id));
  await page.getByRole('heading', { name: id }).waitFor({ timeout: 30_000 });
  return page.getByRole('tablist', { name: 'workflow detail' });
}

/** The summaries the server holds for a run, by event id: what the UI must show. */
async function serverSummaries(workflowId: string): Promise<Map<string, string>> {
  const history = await stack.client.workflow.getHandle(workflowId).fetchHistory();
  const out = new Map<string, string>();
  for (const event of history.events ?? []) {
    const summary = event.userMetadata?.summary;
    if (summary) out.set(String(event.eventId), defaultPayloadConverter.fromPayload<string>(summary));
  }
  return out;
}

/** The rows of the Event History tab (all events, on one page of 500), each as one line of its cells' text. */
async function eventRows(tabs: Locator): Promise<string[]> {
  await tabs.getByRole('tab', { name: /^Event History/ }).click();
  await page.getByRole('heading', { name: 'Event History' }).waitFor();
  await page.getByRole('combobox', { name: 'Per Page' }).selectOption('500');
  const rows = page.getByRole('main').getByRole('table').last().getByRole('row');
  // Event 1, the start, is the last row (newest first): once it is there, the page holds them all.
  await rows.filter({ hasText: 'Workflow Execution Started' }).waitFor();
  return (await rows.allInnerTexts()).map((r) => r.replace(/\s+/g, ' ').trim());
}

/** The timeline's entries: each activity as "type • summary", each timer by its summary. */
async function timelineEntries(tabs: Locator): Promise<string[]> {
  await tabs.getByRole('tab', { name: 'Timeline', exact: true }).click();
  const entries = page.getByRole('main').getByRole('button', { name: /^Event / });
  await entries.first().waitFor();
  return (await entries.allInnerTexts()).map((e) => e.replace(/\s+/g, ' ').trim());
}

describe.sequential('Temporal Web UI', () => {
  it('datum webui-view installs the Datum columns and saved views; the list then says which node is where', async () => {
    await page.goto(listUrl(''));
    await page.getByRole('link', { name: WORKFLOW_ID, exact: true }).first().waitFor({ timeout: 30_000 });
    // A column the person added by hand stays; Run ID and End make room for Datum's.
    await page.getByRole('button', { name: 'Configure Columns' }).click();
    await page.getByRole('button', { name: 'Add History Length column' }).click();
    await page.getByRole('button', { name: 'Close Workflows Table configuration' }).click();

    await clickBookmarklet(page, view.bookmarklet);
    const [loops, attention] = view.views;
    await page.waitForURL((url) => url.searchParams.get('query') === loops.query);
    await page.getByRole('link', { name: WORKFLOW_ID, exact: true }).first().waitFor({ timeout: 30_000 });
    expect(view.columns).toEqual(expect.arrayContaining(['DatumNode', 'DatumStatus', 'DatumConditions', 'DatumGeneration']));
    expect(await columnHeaders()).toEqual([...view.columns, 'History Length']);

    for (const node of NODES.slice(0, 2)) {
      expect(await rowCells(reconcileWorkflowId(node, 1))).toMatchObject({
        DatumNode: node,
        DatumStatus: 'CONVERGED',
        DatumConditions: '',
        DatumGeneration: '1',
        DatumMode: 'enforce',
        Type: 'reconcileNode',
      });
    }
    const conditions = (await stack.client.workflow.getHandle(BROKEN_ID).describe()).typedSearchAttributes.get(DatumConditions);
    expect(conditions?.length).toBeGreaterThan(0);
    const broken = await rowCells(BROKEN_ID);
    expect(broken).toMatchObject({ DatumNode: BROKEN, DatumStatus: 'BLOCKED', DatumGeneration: '1' });
    for (const condition of conditions ?? []) expect(broken.DatumConditions).toContain(condition);
    await shot('01-saved-view-datum-loops');

    // Every view is in the Saved Views menu, once, however many times the bookmarklet ran.
    await clickBookmarklet(page, view.bookmarklet);
    await page.getByRole('link', { name: WORKFLOW_ID, exact: true }).first().waitFor({ timeout: 30_000 });
    expect(await savedViewNames(loops.name)).toEqual(view.views.map((v) => v.name));

    await page.getByRole('group', { name: 'Saved Views' }).getByRole('button', { name: loops.name, exact: true }).click();
    await page.getByRole('menuitem', { name: attention.name, exact: true }).click();
    await page.waitForURL((url) => url.searchParams.get('query') === attention.query);
    await expect.poll(listedIds, { timeout: 20_000 }).toEqual([BROKEN_ID]);
    await shot('02-saved-view-needs-attention');

    // Any visibility query works in the address too; the filter is shown as a chip a person can edit.
    await page.goto(listUrl(`DatumNode="${NODE}"`));
    await page.getByRole('button', { name: `DatumNode = "${NODE}"` }).waitFor({ timeout: 30_000 });
    await expect.poll(listedIds, { timeout: 20_000 }).toEqual([WORKFLOW_ID]);
    await shot('03-list-filtered-by-DatumNode');
  });

  it("a view's share link saves it in a browser that has none; the rollout's history names what it started", async () => {
    const fresh = await newPage();
    try {
      const rollouts = view.views.find((v) => v.query === `WorkflowType="${WORKFLOW_TYPES.rollout}"`)!;
      await fresh.goto(rollouts.share_url);
      await fresh.getByRole('link', { name: ROLLOUT_ID, exact: true }).first().waitFor({ timeout: 30_000 });
      // The UI saves the view and drops savedQuery from the address once it has.
      await fresh.waitForURL((url) => !url.searchParams.has('savedQuery'));
      await fresh.getByRole('group', { name: 'Saved Views' }).getByRole('button', { name: rollouts.name, exact: true }).waitFor();
      await shot('04-share-link-datum-rollouts', fresh);
    } finally {
      await fresh.context().close();
    }

    const tabs = await openWorkflow(ROLLOUT_ID);
    const rows = await eventRows(tabs);
    expect(
      rows.some((r) => r.includes('Activity Type prepareRolloutNodes Summary start generation 1: W-1 … W-3 (3 nodes)')),
    ).toBe(true);
  });

  it('a bookmarklet made for another address of the UI says so and changes nothing', async () => {
    // localhost and 127.0.0.1 are two origins, each with its own storage: the views must go where the person looks.
    const elsewhere = stack.uiUrl.replace('127.0.0.1', 'localhost');
    const other = JSON.parse(await datum(['webui-view', '--ui-url', elsewhere, '-o', 'json'])) as WebUiView;
    const fresh = await newPage();
    try {
      await fresh.goto(listUrl(''));
      await fresh.getByRole('link', { name: WORKFLOW_ID, exact: true }).first().waitFor({ timeout: 30_000 });
      const dialog = fresh.waitForEvent('dialog').then(async (d) => {
        const message = d.message();
        await d.dismiss();
        return message;
      });
      await clickBookmarklet(fresh, other.bookmarklet);
      const message = await dialog;
      expect(message).toContain(`in the Temporal Web UI at ${elsewhere}, but this page is ${stack.uiUrl}`);
      expect(message).toContain(`datum webui-view --ui-url ${stack.uiUrl}`);
      const storage = await fresh.evaluate(() => Object.keys((globalThis as unknown as { localStorage: object }).localStorage));
      expect(storage).not.toContain('saved-workflow-queries');
      expect(fresh.url()).toBe(listUrl(''));
    } finally {
      await fresh.context().close();
    }
  });

  it("a loop's page: the static summary and details it was started with, all its search attributes, the memo", async () => {
    const handle = stack.client.workflow.getHandle(WORKFLOW_ID);
    const description = await handle.describe();
    const staticSummary = await description.staticSummary();
    expect(staticSummary).toMatch(/^W-1 → generation 1 \([0-9a-f]{12}\): build 7\.4, config, app, maintenance$/);
    const tabs = await openWorkflow(WORKFLOW_ID);

    // User Metadata renders each as markdown, in a sandboxed frame of its own.
    await tabs.getByRole('tab', { name: 'User Metadata', exact: true }).click();
    const frames = page.getByTestId('user-metadata').locator('iframe');
    const summary = frames.nth(0).contentFrame().locator('body');
    await expect.poll(async () => (await summary.innerText()).trim()).toBe(staticSummary);
    const details = frames.nth(1).contentFrame();
    await details.getByRole('table').waitFor();
    expect(await details.locator('body').innerText()).toContain(`W-1 at desired generation 1`);
    expect(await details.locator('body').innerText()).toContain(`digest: ${state.desired_digest}`);
    const resources = await details.getByRole('row').allInnerTexts();
    expect(resources.map((r) => r.replace(/\s+/g, ' ').trim())).toEqual([
      'resource type target',
      'build release release:current',
      'config file file:etc/app/config.json',
      'app service service:app',
      'maintenance flag flag:maintenance',
    ]);
    await shot('05-workflow-user-metadata');

    await tabs.getByRole('tab', { name: 'Search Attributes', exact: true }).click();
    await page.getByRole('heading', { name: 'Search Attributes' }).waitFor();
    const searchAttributes = await codeJson(page.getByRole('main').getByRole('textbox').first());
    expect(searchAttributes).toMatchObject({
      DatumNode: NODE,
      DatumGeneration: 1,
      DatumDigest: state.desired_digest,
      DatumStatus: 'CONVERGED',
      DatumMode: 'enforce',
    });
    // All of them: every Datum attribute the server holds for the workflow, with its value, and no other.
    const held = description.typedSearchAttributes;
    const expected = Object.fromEntries(
      DATUM_SEARCH_ATTRIBUTES.flatMap((key) => (held.get(key) === undefined ? [] : [[key.name, held.get(key)]])),
    );
    expect(Object.keys(expected).length).toBeGreaterThanOrEqual(5);
    const shown = Object.fromEntries(
      Object.entries(searchAttributes as Record<string, unknown>).filter(([name]) => name.startsWith('Datum')),
    );
    expect(shown).toEqual(expected);
    await shot('06-workflow-search-attributes');

    await tabs.getByRole('tab', { name: 'Memo', exact: true }).click();
    await page.getByRole('heading', { name: 'Memo' }).waitFor();
    const memo = (await codeJson(page.getByRole('main').getByRole('textbox').first())) as { fields?: Record<string, unknown> };
    const memoSummary = String((await handle.describe()).memo?.[MEMO_SUMMARY]);
    expect(memo.fields?.[MEMO_SUMMARY]).toBe(memoSummary);
    expect(memoSummary).toMatch(/^CONVERGED /);
    await shot('07-workflow-memo-summary');
  });

  it('the timeline and the event history read as the loop: observe, apply, the probe with the last apply, the ledger, the watch until its resync', async () => {
    const applies = (await stack.ledger(stack.client.workflow.getHandle(WORKFLOW_ID)))
      .flatMap((e) => e.authorized_actions)
      .map((a) => `apply ${a.action} ${a.resource_key}`);
    expect(applies).toEqual([
      'apply release.install build',
      'apply file.write config',
      'apply flag.write maintenance',
      'apply service.start app',
    ]);
    const tabs = await openWorkflow(WORKFLOW_ID);

    // The timeline, oldest first: the observation, each apply (the last one takes the probe that
    // proves them all), then the wait: the watch that ends at the resync and observes there
    // (patch watch-ends-at-resync), with no resync timer beside it.
    const timeline = await timelineEntries(tabs);
    const at = (entry: string | RegExp) => timeline.findIndex((e) => (typeof entry === 'string' ? e === entry : entry.test(e)));
    const summarised = [...applies.slice(0, -1), `${applies[applies.length - 1]}, then probe`];
    const pass = [`observe • observe ${NODE}`, ...summarised.map((a) => `apply • ${a}`)];
    expect(pass.map(at).every((i) => i >= 0)).toBe(true);
    expect(pass.map(at)).toEqual([...pass.map(at)].sort((a, b) => a - b));
    // Still running, the watch's entry leads with its attempt.
    expect(at(new RegExp(`^(Attempt 1 / 1 • )?watch • watch ${NODE} until its resync$`))).toBeGreaterThan(
      at(pass[pass.length - 1]),
    );
    expect(timeline).not.toContain(`observe • probe ${NODE}`);
    expect(timeline).not.toContain('resync');
    await shot('08-workflow-timeline');

    // The event history shows every summary the server holds, on its event, local activities' too.
    const rows = await eventRows(tabs);
    const rowOf = (id: string) => rows.filter((r) => r.startsWith(`${id} `));
    const summaries = await serverSummaries(WORKFLOW_ID);
    for (const [id, text] of summaries)
      expect(
        rowOf(id).some((r) => r.endsWith(`Summary ${text}`)),
        `event ${id}: ${text}`,
      ).toBe(true);
    const texts = [...summaries.values()];
    expect(texts).toEqual(
      expect.arrayContaining([
        `observe ${NODE}`,
        ...summarised,
        `watch ${NODE} until its resync`,
        `read authority ${NODE}`,
        `append ledger ${NODE} #1`,
      ]),
    );
    expect(rows.some((r) => r.includes(`Local Activity Activity Type appendLedger Summary append ledger ${NODE} #1`))).toBe(true);
    expect(rows.some((r) => /Timer Started .* Summary resync$/.test(r))).toBe(false);
    await shot('09-workflow-event-history');
  });

  it('a repair that does not take: the timers between attempts say backoff 1/3, 2/3, then the loop waits on resync', async () => {
    const tabs = await openWorkflow(BROKEN_ID);
    const timeline = await timelineEntries(tabs);
    const waits = timeline
      .filter((e) => /^(backoff \d+\/\d+|resync|recheck .*|(Attempt \d+ \/ \d+ • )?watch • .*)$/.test(e))
      .map((e) => e.replace(/^Attempt \d+ \/ \d+ • /, ''));
    // No watch while a backoff runs; once the budget is spent, the watch that ends at the resync.
    expect(waits).toEqual(['backoff 1/3', 'backoff 2/3', `watch • watch ${BROKEN} until its resync`]);
    await shot('10-blocked-timeline-backoff');
    const rows = await eventRows(tabs);
    for (const timer of ['backoff 1/3', 'backoff 2/3'])
      expect(
        rows.some((r) => / Timer Started Start To Fire Timeout .* Summary /.test(r) && r.endsWith(`Summary ${timer}`)),
        timer,
      ).toBe(true);
  });

  it('the Queries tab runs `state` and shows its JSON with convergence_status', async () => {
    const tabs = await openWorkflow(WORKFLOW_ID);
    await tabs.getByRole('tab', { name: 'Queries', exact: true }).click();
    // The query picker is a button wrapping a read-only "Query Type" textbox; the workflow's
    // queries (ledger, state, and the SDK's own) are its options.
    await page
      .getByRole('button')
      .filter({ has: page.getByRole('textbox', { name: 'Query Type' }) })
      .click();
    await page.getByRole('option', { name: 'state', exact: true }).click();
    await page.getByRole('button', { name: 'Run Query' }).click();
    const result = page.getByRole('textbox', { name: 'Query Result' });
    await expect.poll(() => result.innerText(), { timeout: 20_000 }).toContain('"convergence_status"');
    const shown = JSON.parse(await result.innerText()) as NodeState;
    expect(shown).toMatchObject({
      node: NODE,
      workflow_id: WORKFLOW_ID,
      convergence_status: 'CONVERGED',
      desired_generation: 1,
      desired_digest: state.desired_digest,
      mode: 'enforce',
    });
    await shot('11-workflow-query-state');
  });
});
