// Debian's Chromium for the Web UI test. Playwright's own browser download cannot run here (no
// internet but the package registries), so the browser comes from apt, installed on first use.
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { promisify } from 'node:util';

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

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Installs Debian's `chromium` package if /usr/bin/chromium is missing; returns its version line. */
export async function ensureChromium(): Promise<string> {
  if (!isExecutable(CHROMIUM_PATH)) {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) {
      throw new Error(
        `${CHROMIUM_PATH} is missing and this test can install it only as root on Debian. ` +
          "Fix: `sudo apt-get update && sudo apt-get install -y chromium` (Playwright's own browser download is not used).",
      );
    }
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const apt = async (args: string[]) => {
      try {
        await run('apt-get', args, { env, maxBuffer: 64 * 1024 * 1024 });
      } catch (error) {
        const e = error as { stderr?: string; message: string };
        const tail = (e.stderr ?? '').trim().split('\n').slice(-5).join('\n');
        throw new Error(
          `installing Chromium failed at \`apt-get ${args.join(' ')}\`: ${e.message.split('\n')[0]}\n${tail}\nFix: install it by hand (\`apt-get install -y chromium\`) and rerun.`,
        );
      }
    };
    await apt(['update', '-qq']);
    // Without recommends: they pull in a desktop's notification daemon and Mesa. A font for
    // legible screenshots is the one recommend worth having.
    await apt(['install', '-y', '-qq', '--no-install-recommends', 'chromium', 'fonts-liberation']);
    if (!isExecutable(CHROMIUM_PATH)) throw new Error(`apt-get installed chromium but ${CHROMIUM_PATH} is still missing`);
  }
  const { stdout } = await run(CHROMIUM_PATH, ['--version']);
  return stdout.trim();
}
