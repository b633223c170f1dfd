import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { runDatum } from '../helpers/cli';
import { FAST_POLICY } from '../helpers/fleet';
import { useStack } from '../helpers/stack';

/*
 * Node-controlled text reaches the operator's terminal: a symlink's target lands in the agent's
 * refusal, the refusal in a condition, the condition in `datum status` and `datum describe`. A
 * target holding escape sequences (retitle the terminal, clear it, paint text red) or a line break
 * (a forged line of output) must be shown, not obeyed. JSON output stays exact.
 */

const stack = useStack();
const datum = (...args: string[]) => runDatum(args, { TEMPORAL_ADDRESS: stack.env.address, DATUM_FLEET: stack.fleet.dir });

const ESC = '\u001b';
const HOSTILE = `owned${ESC}]0;pwned${'\u0007'}${ESC}[2J${ESC}[31mRED\u202eNX-1 CONVERGED\nNX-2 CONVERGED`;

/** Every character of `text` that drives a terminal (C0 but newline and tab, DEL, C1) or reorders a line. */
const controls = (text: string) =>
  [...text].filter((ch) => {
    const c = ch.codePointAt(0)!;
    return (c < 0x20 && c !== 0x0a && c !== 0x09) || (c >= 0x7f && c <= 0x9f) || c === 0x202e;
  });

describe('escape sequences in a symlink target', () => {
  it('are written as escapes by status and describe, never sent to the terminal; JSON keeps them exact', async () => {
    const node = 'ESC-1';
    const outside = await fs.mkdtemp(path.join(os.tmpdir(), 'datum-esc-'));
    const target = path.join(outside, HOSTILE);
    await fs.mkdir(target, { recursive: true });
    const doc = {
      node,
      generation: 1,
      resources: { config: { type: 'file', path: 'etc/app.conf', content: 'workers = 8\n' } },
      policy: FAST_POLICY,
    };
    await fs.writeFile(stack.fleet.desiredFile(node), stringify(doc));
    await stack.fleet.writeAgent(node, { mode: 'enforce' });
    // A local writer makes etc/ a symlink out of the root, to a directory named with escapes.
    await fs.mkdir(stack.fleet.root(node), { recursive: true });
    await fs.symlink(target, path.join(stack.fleet.root(node), 'etc'));
    await stack.startAgent(node);
    const handle = await stack.startNode(node, 1);
    const state = await stack.waitFor(handle, (s) => s.conditions.some((c) => c.message.includes(ESC)));
    expect(state.conditions.map((c) => c.type)).toContain('ACTION_REFUSED');

    for (const args of [['status'], ['describe', node]]) {
      const r = await datum(...args);
      expect(controls(r.stdout), `datum ${args.join(' ')} writes no raw control character`).toEqual([]);
      expect(r.stdout).toContain('owned\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mRED\\u202eNX-1 CONVERGED');
      // The target's line break does not start a line of its own that could pass for output.
      expect(r.stdout.split('\n').some((line) => line.startsWith('NX-2 CONVERGED'))).toBe(false);
    }
    const json = await datum('status', '-o', 'json');
    const report = JSON.parse(json.stdout) as { conditions: Array<{ node: string; message: string }> };
    expect(report.conditions.find((c) => c.node === node)?.message).toContain(HOSTILE);
    await fs.rm(outside, { recursive: true, force: true });
  });
});
