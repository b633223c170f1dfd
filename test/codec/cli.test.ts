import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DATUM } from '../helpers/cli';

/* `datum codec-server` as an operator starts it: refused without a keyring, serving with one. */

describe('datum codec-server', () => {
  it('refuses to start without a keyring, naming the variable', () => {
    const env = { ...process.env };
    delete env.DATUM_CODEC_KEYS;
    const r = spawnSync(process.execPath, [DATUM, 'codec-server'], { env, encoding: 'utf8', timeout: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/DATUM_CODEC_KEYS is unset — fix: set DATUM_CODEC_KEYS/);
  });

  it('serves the codec protocol: a caller without the token is refused, the holder gets an answer', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-codec-cli-'));
    const keys = path.join(dir, 'keys.json');
    await fs.writeFile(keys, JSON.stringify({ k1: randomBytes(32).toString('base64') }), { mode: 0o600 });
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    const child = spawn(process.execPath, [DATUM, 'codec-server'], {
      env: {
        ...process.env,
        DATUM_CODEC_KEYS: keys,
        DATUM_CODEC_KEY_ID: 'k1',
        DATUM_CODEC_SERVER_TOKEN: 'a-long-random-secret',
        DATUM_CODEC_SERVER_ADDRESS: `127.0.0.1:${port}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const url = `http://127.0.0.1:${port}/decode`;
      const body = JSON.stringify({ payloads: [] });
      let refused: Response | undefined;
      for (let i = 0; i < 100 && !refused; i++) {
        refused = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } }).catch(
          () => undefined,
        );
        if (!refused) await new Promise((r) => setTimeout(r, 200));
      }
      expect(refused?.status).toBe(401);
      const answered = await fetch(url, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json', authorization: 'Bearer a-long-random-secret', 'x-namespace': 'default' },
      });
      expect(answered.status).toBe(200);
      expect(await answered.json()).toEqual({ payloads: [] });
    } finally {
      child.kill('SIGTERM');
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
