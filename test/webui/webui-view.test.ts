import { describe, expect, it } from 'vitest';
import type { WebUiView } from '../../src/cli/commands/webui-view';
import { runDatum } from '../helpers/cli';

/*
 * `datum webui-view` before any browser: what it prints for an address and a namespace, and the
 * usage errors for an address or a namespace it cannot use. The real bin/datum.js in a child
 * process; test/webui/webui.test.ts runs what it prints in Chromium.
 */

/** TEMPORAL_NAMESPACE only when a test gives it. */
const datum = (args: string[], env: Record<string, string> = {}) => runDatum(args, { TEMPORAL_NAMESPACE: undefined, ...env });

describe('datum webui-view', () => {
  it('links every view under the public path and namespace given, and binds the script to that origin', async () => {
    const out = await datum(['webui-view', '--ui-url', 'https://ui.example.com/temporal/', '-n', 'prod', '-o', 'json']);
    expect(out.code).toBe(0);
    const view = JSON.parse(out.stdout) as WebUiView;
    expect(view).toMatchObject({ ui_url: 'https://ui.example.com/temporal', namespace: 'prod' });
    expect(view.views.map((v) => v.name)).toEqual(['Datum loops', 'Datum needs attention', 'Datum rollouts']);
    for (const v of view.views) {
      expect(v.url).toBe(`https://ui.example.com/temporal/namespaces/prod/workflows?query=${encodeURIComponent(v.query)}`);
      expect(v.share_url).toBe(`${v.url}&savedQuery=${encodeURIComponent(v.name)}`);
    }
    expect(view.script).toContain('"origin":"https://ui.example.com"');
    expect(view.script).toContain('"namespace":"prod"');
    expect(decodeURIComponent(view.bookmarklet)).toBe(`javascript:${view.script}`);

    // TEMPORAL_NAMESPACE, as for every other command; the text output carries the same links.
    const text = await datum(['webui-view'], { TEMPORAL_NAMESPACE: 'staging' });
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('Temporal Web UI at http://127.0.0.1:8233, namespace staging');
    expect(text.stdout).toContain('http://127.0.0.1:8233/namespaces/staging/workflows?query=');
    expect(text.stdout).toMatch(/^javascript:/m);
  });

  it('an address that is not a Web UI, or what cannot be a namespace: exit 2 with the fix', async () => {
    for (const url of ['127.0.0.1:8233', 'ftp://ui.example.com', 'http://127.0.0.1:8233/?query=x', 'http://u:p@ui.example.com']) {
      const out = await datum(['webui-view', '--ui-url', url]);
      expect(out.code, url).toBe(2);
      expect(out.stdout).toBe('');
      expect(out.stderr).toContain(
        `--ui-url ${JSON.stringify(url)} is not the address of a Web UI — fix: give the http(s) address the browser shows for it`,
      );
    }
    const namespace = await datum(['webui-view', '-n', 'prod ns']);
    expect(namespace.code).toBe(2);
    expect(namespace.stderr).toMatch(
      /namespace "prod ns" is not a namespace name \(.*a space.*\) — fix: give it as `temporal operator namespace list` shows it/,
    );
    const empty = await datum(['webui-view', '-n', '']);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('namespace "" is not a namespace name');
  });
});
