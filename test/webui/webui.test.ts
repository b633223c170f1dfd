import { promises as fs } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/worker/paths';
import { DATUM_SEARCH_ATTRIBUTES, MEMO_SUMMARY, reconcileWorkflowId, stateQuery, type NodeState } from '../../src/contract';
import { Stack } from '../helpers/stack';
import { CHROMIUM_ARGS, CHROMIUM_PATH, ensureChromium } from './chromium';

/*
 * What a person sees in the Temporal Web UI of a dev server running Datum: the reconcile
 * workflows listed with their Datum search attributes, the memo's one-line summary, and the
 * `state` query run from the Queries tab. Debian's Chromium, driven by playwright-core.
 * Screenshots go to test-artifacts/webui/ (git-ignored); a failing step leaves failure-*.png.
 */

const NODES = ['W-1', 'W-2'] as const;
const [NODE] = NODES;
const WORKFLOW_ID = reconcileWorkflowId(NODE, 1);
const SHOTS = path.join(projectRoot(), 'test-artifacts', 'webui');
const DATUM_COLUMNS = ['DatumStatus', 'DatumNode', 'DatumGeneration', 'DatumMode'] as const;

let stack: Stack;
let browser: Browser;
let page: Page;
let state: NodeState;
let memoSummary: string;

async function startStack(): Promise<void> {
  stack = await Stack.start({ ui: true });
  await stack.startController();
  await Promise.all(
    NODES.map(async (node) => {
      await stack.fleet.writeDesired(node, 1);
      await stack.fleet.writeAgent(node, { mode: 'enforce' });
      await stack.startAgent(node);
      const handle = await stack.startNode(node, 1);
      await stack.waitFor(handle, (s) => s.convergence_status === 'CONVERGED');
    }),
  );
  const handle = stack.client.workflow.getHandle(WORKFLOW_ID);
  state = await handle.query(stateQuery);
  memoSummary = String((await handle.describe()).memo?.[MEMO_SUMMARY]);
  // Visibility is eventually consistent: wait until the list the UI shows has caught up.
  const query = `DatumStatus="CONVERGED" AND DatumNode IN (${NODES.map((n) => `"${n}"`).join(', ')})`;
  const deadline = Date.now() + 20_000;
  while ((await stack.client.workflow.count(query)).count < NODES.length) {
    if (Date.now() > deadline) throw new Error(`visibility never showed both nodes CONVERGED (${query})`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

beforeAll(async () => {
  // The first run on a machine installs Chromium with apt (minutes, hence the hook's timeout).
  await fs.rm(SHOTS, { recursive: true, force: true });
  await Promise.all([ensureChromium(), startStack(), fs.mkdir(SHOTS, { recursive: true })]);
  // launch() gives every browser a fresh temporary profile (user-data dir) and removes it on close.
  browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS });
  page = await browser.newPage({ viewport: { width: 1760, height: 1000 } });
  page.setDefaultTimeout(20_000);
  // The UI fetches a news feed from the internet; this machine has none, so stay on the dev server.
  const ui = stack.uiUrl;
  await page.route(
    (url) => url.origin !== ui,
    (route) => route.abort(),
  );
}, 600_000);

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

const listUrl = (query: string) => `${stack.uiUrl}/namespaces/default/workflows?query=${encodeURIComponent(query)}`;
const shot = (name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

/** The cells of the list's row for `workflowId`, keyed by column header. */
async function rowCells(workflowId: string): Promise<Record<string, string>> {
  const table = page.getByRole('table', { name: 'Workflows' });
  const row = table
    .getByRole('row')
    .filter({ has: page.getByRole('link', { name: workflowId, exact: true }) })
    .first();
  await row.waitFor();
  const headers = await table.getByRole('columnheader').allInnerTexts();
  const cells = await row.getByRole('cell').allInnerTexts();
  return Object.fromEntries(headers.map((h, i) => [h.trim(), (cells[i] ?? '').trim()]));
}

/** The JSON a tab shows in its code view (a CodeMirror editor, role textbox). */
async function codeJson(view: Locator): Promise<unknown> {
  await view.waitFor();
  return JSON.parse(await view.innerText()) as unknown;
}

describe.sequential('Temporal Web UI', () => {
  it('lists the reconcile workflows with Datum search attribute columns, and filters by DatumNode', async () => {
    await page.goto(listUrl('WorkflowType="reconcileNode"'));
    await page.getByRole('link', { name: WORKFLOW_ID, exact: true }).first().waitFor({ timeout: 30_000 });

    // The list shows Datum's search attributes once a person adds them as columns (kept in the
    // browser's local storage); Run ID and End make room for them.
    await page.getByRole('button', { name: 'Configure Columns' }).click();
    for (const column of DATUM_COLUMNS) await page.getByRole('button', { name: `Add ${column} column` }).click();
    for (const column of ['Run ID', 'End']) await page.getByRole('button', { name: `Remove ${column} column` }).click();
    await page.getByRole('button', { name: 'Close Workflows Table configuration' }).click();
    await page.getByRole('columnheader', { name: 'DatumStatus' }).waitFor();

    for (const node of NODES) {
      expect(await rowCells(reconcileWorkflowId(node, 1))).toMatchObject({
        Type: 'reconcileNode',
        DatumStatus: 'CONVERGED',
        DatumNode: node,
        DatumGeneration: '1',
        DatumMode: 'enforce',
      });
    }
    await shot('01-list-reconcile-workflows');

    await page.goto(listUrl(`DatumNode="${NODE}"`));
    // The filter is shown as a chip a person can edit.
    await page.getByRole('button', { name: `DatumNode = "${NODE}"` }).waitFor({ timeout: 30_000 });
    expect(await rowCells(WORKFLOW_ID)).toMatchObject({ 'Workflow ID': WORKFLOW_ID, DatumStatus: 'CONVERGED', DatumNode: NODE });
    await expect(page.getByRole('link', { name: reconcileWorkflowId(NODES[1], 1), exact: true }).count()).resolves.toBe(0);
    await shot('02-list-filtered-by-DatumNode');
  });

  it("a workflow's page shows all its Datum search attributes and the memo summary", async () => {
    await page.getByRole('link', { name: WORKFLOW_ID, exact: true }).first().click();
    await page.getByRole('heading', { name: WORKFLOW_ID }).waitFor({ timeout: 30_000 });
    const tabs = page.getByRole('tablist', { name: 'workflow detail' });

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
    const held = (await stack.client.workflow.getHandle(WORKFLOW_ID).describe()).typedSearchAttributes;
    const expected = Object.fromEntries(
      DATUM_SEARCH_ATTRIBUTES.flatMap((key) => (held.get(key) === undefined ? [] : [[key.name, held.get(key)]])),
    );
    expect(Object.keys(expected).length).toBeGreaterThanOrEqual(5);
    const shown = Object.fromEntries(
      Object.entries(searchAttributes as Record<string, unknown>).filter(([name]) => name.startsWith('Datum')),
    );
    expect(shown).toEqual(expected);
    await shot('03-workflow-search-attributes');

    await tabs.getByRole('tab', { name: 'Memo', exact: true }).click();
    await page.getByRole('heading', { name: 'Memo' }).waitFor();
    const memo = (await codeJson(page.getByRole('main').getByRole('textbox').first())) as { fields?: Record<string, unknown> };
    expect(memo.fields?.[MEMO_SUMMARY]).toBe(memoSummary);
    expect(memoSummary).toMatch(/^CONVERGED /);
    await shot('04-workflow-memo-summary');
  });

  it('the Queries tab runs `state` and shows its JSON with convergence_status', async () => {
    await page.getByRole('tablist', { name: 'workflow detail' }).getByRole('tab', { name: 'Queries', exact: true }).click();
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
    await shot('05-workflow-query-state');
  });
});
