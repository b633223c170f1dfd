import { DatumConditions, DatumGeneration, DatumMode, DatumNode, DatumStatus, WORKFLOW_TYPES } from '../../contract';
import { UsageError, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withFix } from '../errors';
import { print, printDocument, table } from '../output';
import type { CommandModule } from '../command';

/*
 * Datum's view of the Temporal Web UI's workflow list: saved views (visibility queries) and the
 * Datum search attributes as columns. The UI (2.54, the one `temporal server start-dev` serves)
 * has no server-side setting for either: both live in the browser's localStorage, per origin and
 * namespace, under the keys its stores persist to (src/lib/stores/saved-queries.ts and
 * configurable-table-columns.ts in temporalio/ui). So this command prints what installs them
 * there: a bookmarklet (the same script for the browser console), and the UI's own share links,
 * which add one saved view each but no columns.
 */

/** The localStorage keys and shapes of Temporal UI 2.54: `{ [namespace]: [{ label }] }`, `{ [namespace]: [{ id, name, query, type }] }`. */
export const UI_STORAGE = { columns: 'namespace-workflow-table-columns', views: 'saved-workflow-queries' } as const;

/** The list as Datum reads it: which node, where it is and why, then the UI's own columns. */
export const DATUM_COLUMNS = [
  'Status',
  'Workflow ID',
  DatumNode.name,
  DatumStatus.name,
  DatumConditions.name,
  DatumGeneration.name,
  DatumMode.name,
  'Type',
  'Start',
];
/** Dropped to make room: a run id says nothing a person acts on, and a loop never ends. */
const DROPPED_COLUMNS = ['Run ID', 'End'];

const RUNNING_LOOPS = `WorkflowType="${WORKFLOW_TYPES.reconcileNode}" AND ExecutionStatus="Running"`;

export interface SavedView {
  id: string;
  name: string;
  query: string;
}

/**
 * The saved views, first the one the script opens. A run that ended (superseded, continued as
 * new) keeps its last DatumStatus, hence ExecutionStatus="Running" on the loops' views.
 */
export const DATUM_VIEWS: readonly SavedView[] = [
  { id: 'datum-loops', name: 'Datum loops', query: RUNNING_LOOPS },
  {
    id: 'datum-attention',
    name: 'Datum needs attention',
    query: `${RUNNING_LOOPS} AND ${DatumStatus.name} IN ("DRIFTED", "RETRY", "BLOCKED", "CONFLICT")`,
  },
  { id: 'datum-rollouts', name: 'Datum rollouts', query: `WorkflowType="${WORKFLOW_TYPES.rollout}"` },
];

/** What the script needs, as plain JSON: it runs in the browser, where nothing of this module exists. */
export interface ViewInstall {
  origin: string;
  /** Where the script goes once it has written: the first view's list. */
  openUrl: string;
  namespace: string;
  keys: typeof UI_STORAGE;
  columns: string[];
  droppedColumns: string[];
  views: SavedView[];
}

/** The little of a browser window the script touches. */
export interface BrowserWindow {
  location: { origin: string; assign(url: string): void };
  localStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void };
  alert(message: string): void;
}

/**
 * Writes Datum's columns and saved views into the Web UI's localStorage, then opens the first
 * view (a page load, which is when the UI reads its stores). Serialized with toString() into the
 * bookmarklet: it must use nothing from outside its own body.
 *
 * Columns: Datum's, then any other the person had added (Run ID and End go). Views: ours replace
 * those of the same id or name (running it twice changes nothing); the person's others stay.
 */
export function installDatumView(c: ViewInstall, w: BrowserWindow): void {
  if (w.location.origin !== c.origin) {
    w.alert(
      `Datum: this installs the Datum view in the Temporal Web UI at ${c.origin}, but this page is ${w.location.origin}. ` +
        `Open ${c.openUrl} and run it there, or print one for this address: datum webui-view --ui-url ${w.location.origin}`,
    );
    return;
  }
  const read = (key: string): Record<string, unknown> => {
    try {
      const value: unknown = JSON.parse(w.localStorage.getItem(key) ?? '{}');
      return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
    } catch {
      return {};
    }
  };
  const listOf = (value: unknown): Array<Record<string, unknown>> =>
    Array.isArray(value) ? value.filter((x): x is Record<string, unknown> => x !== null && typeof x === 'object') : [];

  const columns = read(c.keys.columns);
  const extra = listOf(columns[c.namespace]).filter(
    (col) => typeof col.label === 'string' && !c.columns.includes(col.label) && !c.droppedColumns.includes(col.label),
  );
  columns[c.namespace] = [...c.columns.map((label) => ({ label })), ...extra];

  const views = read(c.keys.views);
  const ours = new Set(c.views.flatMap((v) => [v.id, v.name]));
  const kept = listOf(views[c.namespace]).filter((v) => !ours.has(String(v.id)) && !ours.has(String(v.name)));
  views[c.namespace] = [...kept, ...c.views.map((v) => ({ ...v, type: 'user' }))];

  w.localStorage.setItem(c.keys.columns, JSON.stringify(columns));
  w.localStorage.setItem(c.keys.views, JSON.stringify(views));
  w.location.assign(c.openUrl);
}

export interface WebUiView {
  ui_url: string;
  namespace: string;
  columns: string[];
  /** Each view: its list (`url`) and the UI's share link, which saves it as a view when opened (`share_url`). */
  views: Array<SavedView & { url: string; share_url: string }>;
  /** For the browser console on the Web UI's page. */
  script: string;
  /** The same script as a bookmark's URL. */
  bookmarklet: string;
}

/** The views, links and script for the Web UI at `uiUrl` (no trailing slash) and `namespace`. */
export function webUiView(uiUrl: string, namespace: string): WebUiView {
  const list = `${uiUrl}/namespaces/${encodeURIComponent(namespace)}/workflows`;
  const urlOf = (query: string) => `${list}?query=${encodeURIComponent(query)}`;
  const views = DATUM_VIEWS.map((v) => ({
    ...v,
    url: urlOf(v.query),
    share_url: `${urlOf(v.query)}&savedQuery=${encodeURIComponent(v.name)}`,
  }));
  const install: ViewInstall = {
    origin: new URL(uiUrl).origin,
    openUrl: views[0].url,
    namespace,
    keys: UI_STORAGE,
    columns: DATUM_COLUMNS,
    droppedColumns: DROPPED_COLUMNS,
    views: DATUM_VIEWS.map(({ id, name, query }) => ({ id, name, query })),
  };
  // One line: the compiled function's indentation is only weight in a bookmark (and no string
  // in it spans lines, so joining them changes no string).
  const source = installDatumView.toString().replace(/\n\s*/g, ' ');
  const script = `(${source})(${JSON.stringify(install)}, window);`;
  return {
    ui_url: uiUrl,
    namespace,
    columns: DATUM_COLUMNS,
    views,
    script,
    bookmarklet: `javascript:${encodeURIComponent(script)}`,
  };
}

// ---------------------------------------------------------------------------------------------
// The command.

interface WebUiViewRaw extends OutputFlags {
  uiUrl: string;
  namespace?: string;
}

export interface WebUiViewInput {
  uiUrl: string;
  namespace: string;
  format: OutputFormat;
}

const parsedUrl = (text: string): URL | null => {
  try {
    return new URL(text);
  } catch {
    return null;
  }
};

/** An http(s) address with no query or fragment, without its trailing slash (a public path stays). */
export function uiUrlFlag(text: string): string {
  const url = parsedUrl(text);
  if (url === null || !['http:', 'https:'].includes(url.protocol) || url.search || url.hash || url.username || url.password)
    throw new UsageError(
      withFix(
        `--ui-url ${JSON.stringify(text)} is not the address of a Web UI`,
        'give the http(s) address the browser shows for it, such as http://127.0.0.1:8233 (datum dev) or https://temporal-ui.example.com/temporal',
      ),
    );
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

// Not Temporal's rule (a self-hosted server takes almost any name): what cannot be one, and would
// break the view's address, such as a space or a slash from a mistyped flag.
// eslint-disable-next-line no-control-regex
const NOT_A_NAMESPACE = /[\s/?#"'\\\u0000-\u001f]/;

export const webUiViewCommand: CommandModule<WebUiViewRaw, WebUiViewInput> = {
  input(values) {
    const namespace = values.namespace ?? (process.env.TEMPORAL_NAMESPACE || 'default');
    if (namespace === '' || NOT_A_NAMESPACE.test(namespace))
      throw new UsageError(
        withFix(
          `namespace ${JSON.stringify(namespace)} is not a namespace name (it is empty, or has a space, a slash, "?", "#", a quote or a control character)`,
          'give it as `temporal operator namespace list` shows it, such as -n default',
        ),
      );
    return { uiUrl: uiUrlFlag(values.uiUrl), namespace, format: outputFormat(values) };
  },
  run({ uiUrl, namespace, format }) {
    const view = webUiView(uiUrl, namespace);
    if (format !== 'text') {
      printDocument(format, view);
      return Promise.resolve(0);
    }
    print(`Datum's view of the workflow list in the Temporal Web UI at ${uiUrl}, namespace ${namespace}.

Columns: ${view.columns.join(', ')}

Install the columns and all the saved views: on a page of that Web UI, run this bookmarklet
(save it as a bookmark's URL and click it there, or paste the script of -o json into the
browser's console). It opens "${view.views[0].name}" when done; reload other open tabs of the UI.

${view.bookmarklet}

Or add one saved view, without the columns, by opening its share link once (the UI's own
"Share" link: each visit adds the view again):

${table(
  ['VIEW', 'SHARE LINK'],
  view.views.map((v) => [v.name, v.share_url]),
)}

The views' queries, for the search box or \`temporal workflow list --query\`:

${table(
  ['VIEW', 'QUERY'],
  view.views.map((v) => [v.name, v.query]),
)}`);
    return Promise.resolve(0);
  },
};
