import { promises as fs } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadKeyring } from '../../src/codec';
import { runCodecServer, type RunningCodecServer } from '../../src/codec/server';
import { projectRoot } from '../../src/worker/paths';
import { CHROMIUM_ARGS, CHROMIUM_PATH, ensureChromium } from '../webui/chromium';
import { CodecStack, newKey, waitForState, writeKeyring } from './harness';

/*
 * The Temporal Web UI decoding Datum's encrypted payloads through `datum codec-server`, in a real
 * browser (Debian's Chromium): the dev server's UI is started with --ui-codec-endpoint, as an
 * operator would configure it. An authorized person sees the workflow's input in clear; without
 * the token the codec server refuses and the UI can show only ciphertext.
 *
 * The bearer token is added to the browser's requests to the codec server by the test, standing
 * in for what does it in production: the UI's "pass the user access token" (which needs the UI's
 * own login and https, neither of which a dev server has) or an authenticating proxy.
 */

const NODE = 'U-1';
const TOKEN = `webui-codec-token-${Date.now()}`;
const SHOTS = path.join(projectRoot(), 'test-artifacts', 'codec-webui');
const INPUT_JSON = `"node": "${NODE}"`;

let stack: CodecStack;
let codecServer: RunningCodecServer;
let browser: Browser;
let ui: string;
let keysDir: string | undefined;
let workflowUrl: string;
/** The workflow's input as the server stores it: the ciphertext's base64, as the UI shows it undecoded. */
let storedInput: string;
const codecLog: string[] = [];

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** A page that may reach only the UI and the codec server; with `token`, it sends the bearer token to the latter. */
async function openPage(token?: string): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  page.setDefaultTimeout(20_000);
  await page.route(
    (url) => url.origin !== ui && !url.href.startsWith(codecServer.url),
    (route) => route.abort(),
  );
  if (token)
    await page.route(`${codecServer.url}/**`, (route) =>
      route.continue({ headers: { ...route.request().headers(), authorization: `Bearer ${token}` } }),
    );
  return page;
}

beforeAll(async () => {
  await fs.mkdir(SHOTS, { recursive: true });
  const uiPort = await freePort();
  ui = `http://127.0.0.1:${uiPort}`;
  [, keysDir] = await Promise.all([ensureChromium(), fs.mkdtemp(path.join(os.tmpdir(), 'datum-codec-ui-keys-'))]);
  const ring = await writeKeyring(keysDir, 'keys', { k1: newKey() });
  codecServer = await runCodecServer({
    keyring: loadKeyring(ring.DATUM_CODEC_KEYS),
    tokens: [TOKEN],
    port: 0,
    allowedOrigins: [ui],
    log: (line) => codecLog.push(line),
  });
  stack = await CodecStack.start({ uiPort, extraArgs: ['--ui-codec-endpoint', codecServer.url] });
  await stack.fleet.writeDesired(NODE, 1, {
    extra: { secret: { type: 'file', path: 'etc/app/secret.env', content: 'db-password=hunter2', sensitive: true } },
  });
  await stack.fleet.writeAgent(NODE, { mode: 'enforce' });
  await stack.startController(ring);
  await stack.startAgent(NODE, ring);
  const handle = await stack.startNode(await stack.client(ring), NODE, 1);
  await waitForState(handle, (s) => s.convergence_status === 'CONVERGED');
  workflowUrl = `${ui}/namespaces/default/workflows/${encodeURIComponent(handle.workflowId)}`;
  const started = (await handle.fetchHistory()).events?.[0]?.workflowExecutionStartedEventAttributes;
  const payload = started?.input?.payloads?.[0];
  if (!payload?.data) throw new Error('the workflow started without an input payload');
  storedInput = Buffer.from(payload.data).toString('base64');
  browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS });
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await codecServer?.close();
  if (keysDir) await fs.rm(keysDir, { recursive: true, force: true });
});

describe.sequential('Web UI through the codec server', () => {
  it("shows an authorized person the workflow's input decrypted", async () => {
    const page = await openPage(TOKEN);
    await page.goto(workflowUrl);
    await page.getByText(INPUT_JSON).first().waitFor({ timeout: 30_000 });
    await expect.poll(() => page.innerText('main')).toContain('"generation": 1');
    await page.screenshot({ path: path.join(SHOTS, '01-authorized-input-decoded.png'), fullPage: true });
    expect(codecLog.join('\n')).toMatch(/POST \/decode\S* namespace default: 200/);
    await page.close();
  });

  it('shows a person without the token only ciphertext, and the codec server refuses them', async () => {
    const refusedBefore = codecLog.filter((l) => /: 401,/.test(l)).length;
    const page = await openPage();
    await page.goto(workflowUrl);
    // The Input card shows the payload as stored: either its data (the ciphertext's base64) or,
    // depending on the UI's rendering, the whole payload with its binary/encrypted encoding.
    const ciphertext = page
      .getByText(storedInput.slice(0, 32))
      .or(page.getByText(Buffer.from('binary/encrypted').toString('base64')));
    await ciphertext
      .first()
      .waitFor({ timeout: 60_000 })
      .catch(async (error: unknown) => {
        // What the page showed instead, for whoever reads the failure.
        await page.screenshot({ path: path.join(SHOTS, '02-unauthorized-FAILED.png'), fullPage: true });
        const shown = (await page.innerText('main').catch(() => '(no main)')).slice(0, 3000);
        throw new Error(`the page showed no ciphertext (${storedInput.slice(0, 32)}…); it showed:\n${shown}`, {
          cause: error,
        });
      });
    await expect.poll(() => codecLog.filter((l) => /: 401,/.test(l)).length).toBeGreaterThan(refusedBefore);
    expect(await page.innerText('main')).not.toContain(INPUT_JSON);
    await page.screenshot({ path: path.join(SHOTS, '02-unauthorized-ciphertext.png'), fullPage: true });
    await page.close();
  });
});
