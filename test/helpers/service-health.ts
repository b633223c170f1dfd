import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileBytes } from '../../src/domain';

/** The sha256 of config D7 ({ workers: 8 }), as the demo service reports the config it loaded. */
export const D7 = createHash('sha256')
  .update(fileBytes({ workers: 8 }))
  .digest('hex');

/** The demo service `app` of a node root: the pid the agent started, and what the process itself answers. */
export async function health(root: string): Promise<{ build: string; config_sha256: string; pid: number }> {
  const state = JSON.parse(await fs.readFile(path.join(root, '.datum/services/app.json'), 'utf8')) as {
    pid: number;
    port: number;
  };
  const res = await fetch(`http://127.0.0.1:${state.port}/health`);
  return { ...((await res.json()) as { build: string; config_sha256: string }), pid: state.pid };
}
