// Debian's Chromium for the Web UI test. Playwright's own browser download cannot run here (no
// internet but the package registries), so the browser comes from apt, installed on first use.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { aptInstall, isExecutable } from '../helpers/tools';

const run = promisify(execFile);

export const CHROMIUM_PATH = '/usr/bin/chromium';

/**
 * Flags for a sandboxed, offline machine: no setuid sandbox (we run as root), no GPU, and none of
 * the background traffic (updates, sync, QUIC probes) that would only time out here.
 */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Installs Debian's `chromium` package if /usr/bin/chromium is missing; returns its version line. */
export async function ensureChromium(): Promise<string> {
  if (!isExecutable(CHROMIUM_PATH)) {
    // Without recommends: they pull in a desktop's notification daemon and Mesa. A font for
    // legible screenshots is the one recommend worth having.
    await aptInstall(
      ['chromium', 'fonts-liberation'],
      `Chromium (${CHROMIUM_PATH})`,
      "install it yourself (apt-get install chromium fonts-liberation): Playwright's own browser download is not used",
    );
    if (!isExecutable(CHROMIUM_PATH)) throw new Error(`apt-get installed chromium but ${CHROMIUM_PATH} is still missing`);
  }
  const { stdout } = await run(CHROMIUM_PATH, ['--version']);
  return stdout.trim();
}
