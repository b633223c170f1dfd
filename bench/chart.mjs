// The benchmark's results as an SVG chart: four panels of grouped bars, one group per fleet size.
// bench/run.mjs calls writeChart after it writes bench/results/<date>.json. To redraw the chart
// of an existing results file:  node bench/chart.mjs bench/results/2026-11-29.json
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [W, H, HEADER, PAD] = [1200, 800, 56, 14];
const C = { text: '#222', muted: '#787878', axis: '#505050', grid: '#e4e4e4', target: '#cd2323' };
const SERIES = {
  floor: '#969696',
  ceiling: '#607ca0',
  watch: '#1f77b4',
  watchLight: '#96c4e6',
  poll: '#e67314',
  pollLight: '#fabe82',
};
const MODES = ['watch', 'poll'];

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const px = (v) => Math.round(v * 10) / 10;
/** An estimate of the width of `s` at `size` px (DejaVu Sans averages a little under 0.6 em). */
const textW = (s, size, em = 0.6) => [...s].length * size * em;
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const text = (s, x, y, { size = 14, color = C.text, anchor = 'start', bold = false } = {}) =>
  `<text x="${px(x)}" y="${px(y)}" font-size="${size}" fill="${color}" text-anchor="${anchor}"${bold ? ' font-weight="bold"' : ''}>${esc(s)}</text>`;
const rect = (x, y, w, h, fill) =>
  `<rect x="${px(x)}" y="${px(y)}" width="${px(w)}" height="${px(Math.max(0, h))}" fill="${fill}"/>`;
const line = (x1, y1, x2, y2, stroke, dash = '') =>
  `<line x1="${px(x1)}" y1="${px(y1)}" x2="${px(x2)}" y2="${px(y2)}" stroke="${stroke}"${dash && ` stroke-width="2" stroke-dasharray="${dash}"`}/>`;
const overlaps = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/** Three significant figures (whole seconds from 100 up), never exponent notation. */
const formatValue = (v, a = Math.abs(v)) =>
  v === null ? 'n/a' : v === 0 ? '0' : a < 0.01 ? v.toPrecision(1) : v.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);

/**
 * The four panels: `series` names and colours the bars of every group, one group per fleet size
 * and server (rows from before --server are the dev server's), with one controller worker.
 */
function panelsOf(all) {
  const results = all.filter((r) => (r.workers ?? 1) === 1 && !r.error);
  const serverOf = (r) => r.server ?? 'dev';
  const keys = [...new Map(results.filter((r) => num(r.nodes) !== null).map((r) => [`${serverOf(r)} ${r.nodes}`, r])).values()]
    .sort((a, b) => a.nodes - b.nodes || serverOf(a).localeCompare(serverOf(b)))
    .map((r) => ({ server: serverOf(r), nodes: r.nodes }));
  const servers = new Set(keys.map((k) => k.server));
  const rowOf = (key, mode) => results.find((r) => r.nodes === key.nodes && serverOf(r) === key.server && r.mode === mode) ?? {};
  const label = (key) => (servers.size > 1 ? `${key.nodes} ${key.server}` : `${key.nodes} nodes`);
  const groupsOf = (barsOf) => keys.map((key) => ({ label: label(key), bars: barsOf(key) }));
  const byMode =
    (...keys) =>
    (key) =>
      MODES.flatMap((mode) => keys.map((k) => ({ value: rowOf(key, mode)[k] })));
  const percentileSeries = [
    ['watch p50', SERIES.watch],
    ['watch p99', SERIES.watchLight],
    ['poll p50', SERIES.poll],
    ['poll p99', SERIES.pollLight],
  ];
  // The ratio is the rollout panel's headline: whole numbers from 10× up, where a tenth is noise.
  const datum = (row) => ({
    value: row.rollout_s,
    notes: num(row.datum_over_floor) === null ? [] : [`${row.datum_over_floor.toFixed(row.datum_over_floor >= 10 ? 0 : 1)}×`],
  });
  const rollout = (key) => {
    const [watch, poll] = MODES.map((mode) => rowOf(key, mode));
    // One floor run per size, so both rows carry the same floor_s; each mode's run measures its own ceiling: the bar is their mean.
    const ceilings = [watch.ceiling_s, poll.ceiling_s].map(num).filter((v) => v !== null);
    const ceiling = ceilings.length === 0 ? null : ceilings.reduce((a, b) => a + b, 0) / ceilings.length;
    return [{ value: num(watch.floor_s) ?? poll.floor_s }, { value: ceiling }, datum(watch), datum(poll)];
  };
  return [
    {
      title: 'Full rollout (s)',
      series: [
        ['floor', SERIES.floor],
        ['no-op ceiling', SERIES.ceiling],
        ['Datum watch', SERIES.watch],
        ['Datum poll', SERIES.poll],
      ],
      notes: ['n× = Datum / floor'],
      groups: groupsOf(rollout),
    },
    {
      title: 'Verification pass (s)',
      series: [
        ['watch', SERIES.watch],
        ['poll', SERIES.poll],
      ],
      groups: groupsOf(byMode('verification_pass_s')),
      target: { value: 30, label: 'target 30 s (1000 nodes)' },
    },
    {
      title: 'Drift detection, edit → ledger (s, log)',
      series: percentileSeries,
      log: true,
      groups: groupsOf(byMode('detection_p50_s', 'detection_p99_s')),
      target: { value: 1, label: 'target p99 ≤ 1 s (watch)' },
    },
    {
      title: 'Per-node convergence (s)',
      series: percentileSeries,
      groups: groupsOf(byMode('convergence_p50_s', 'convergence_p99_s')),
    },
  ];
}

/** The legend: the series in one row, then any notes, in grey. */
function legend(spec, x, y) {
  const out = [];
  let cx = x;
  for (const [name, color] of spec.series) {
    out.push(rect(cx, y, 13, 13, color), text(name, cx + 20, y + 12));
    cx += 38 + textW(name, 14, 0.56);
  }
  (spec.notes ?? []).forEach((note, i) => out.push(text(note, x, y + 34 + 22 * i, { color: C.muted })));
  return out.join('');
}

/** A y scale with `bar.room` px above each bar for its labels, and room above the target for its own. */
function yScale(spec, bars, top, bottom) {
  const h = bottom - top;
  const need = [
    ...bars.filter((b) => b.value !== null).map((b) => [b.value, b.room]),
    ...(spec.target ? [[spec.target.value, 22]] : []),
  ];
  if (spec.log) {
    const positive = need.map(([v]) => v).filter((v) => v > 0);
    const lo = positive.length === 0 ? 0.1 : 10 ** Math.floor(Math.log10(Math.min(...positive)));
    const span = Math.max(1, ...need.map(([v, room]) => Math.log10(v / lo) / (1 - room / h)));
    const ticks = Array.from({ length: Math.floor(span + 1e-9) + 1 }, (_, i) => lo * 10 ** i);
    return { lo, ticks, at: (v) => bottom - (Math.log10(Math.max(v, lo) / lo) / span) * h };
  }
  const max = Math.max(0, ...need.map(([v]) => v));
  const step = [1, 2, 5, 10]
    .map((m) => m * 10 ** Math.floor(Math.log10(max > 0 ? max / 5 : 1)))
    .find((s) => s >= max / 5 - 1e-12);
  const hi = Math.max(step, Math.ceil(Math.max(...need.map(([v, room]) => v / (1 - room / h))) / step - 1e-9) * step);
  return {
    lo: 0,
    ticks: Array.from({ length: Math.round(hi / step) + 1 }, (_, i) => i * step),
    at: (v) => bottom - (v / hi) * h,
  };
}

/** One panel in `box`; its plot starts `legendRoom` px below the legend's top. */
function panel(spec, box, legendRoom) {
  const [x0, y0] = [box.x + PAD, box.y + PAD];
  const out = [text(spec.title, x0, y0 + 15, { size: 17, bold: true }), legend(spec, x0, y0 + 30)];
  const plot = { left: x0 + 52, right: box.x + box.w - PAD - 4, top: y0 + 40 + legendRoom, bottom: box.y + box.h - PAD - 24 };
  const groupW = (plot.right - plot.left) / spec.groups.length;
  const slotW = Math.min(96, (groupW - 2 * Math.max(6, groupW * 0.04)) / spec.series.length);
  const xOf = (gi, bi) => plot.left + gi * groupW + (groupW - slotW * spec.series.length) / 2 + bi * slotW;
  const bars = spec.groups.flatMap((g, gi) =>
    g.bars.map(({ value, notes = [] }, bi) => ({
      value: num(value),
      x: xOf(gi, bi),
      w: slotW - 2,
      color: spec.series[bi][1],
      notes,
    })),
  );
  for (const b of bars) b.lines = [...(b.value === null ? [] : b.notes), formatValue(b.value)];
  if (bars.every((b) => b.value === null))
    return out.concat(text('no data', box.x + box.w / 2, box.y + box.h / 2, { color: C.muted, anchor: 'middle' })).join('');
  // Bar labels take the largest size up to 13 px at which every bar's widest label fits the bar.
  const size = Math.max(
    8,
    Math.min(13, ...bars.map((b) => b.w / textW('0'.repeat(Math.max(...b.lines.map((s) => s.length))), 1))),
  );
  for (const b of bars) b.room = b.lines.length * (size + 3) + 4;
  const scale = yScale(spec, bars, plot.top, plot.bottom);
  const base = scale.at(scale.lo);
  for (const t of scale.ticks)
    out.push(
      line(plot.left, scale.at(t), plot.right, scale.at(t), C.grid),
      text(String(Number(t.toPrecision(6))), plot.left - 8, scale.at(t) + 5, { color: C.axis, anchor: 'end' }),
    );
  for (const b of bars) {
    b.top = b.value === null ? base : scale.at(b.value);
    if (b.value !== null) out.push(rect(b.x, b.top, b.w, base - b.top, b.color));
    // Notes (the rollout's ratio) take the bar's colour, which sets them apart from the value.
    const colorOf = (i) => (b.value === null ? C.muted : i < b.lines.length - 1 ? b.color : C.text);
    b.lines.forEach((s, i) =>
      out.push(
        text(s, b.x + b.w / 2, b.top - 4 - (b.lines.length - 1 - i) * (size + 3), { size, anchor: 'middle', color: colorOf(i) }),
      ),
    );
  }
  out.push(line(plot.left, plot.top, plot.left, base, C.axis), line(plot.left, base, plot.right, base, C.axis));
  spec.groups.forEach((g, gi) => out.push(text(g.label, plot.left + (gi + 0.5) * groupW, base + 19, { anchor: 'middle' })));
  if (spec.target) {
    const [y, w] = [scale.at(spec.target.value), textW(spec.target.label, 14)];
    out.push(line(plot.left + 1, y, plot.right, y, C.target, '6 4'));
    // Above the line, then below; at the right end, then the left: the first spot clear of every bar and its labels.
    const spots = [
      [plot.right - w - 4, y - 6],
      [plot.left + 6, y - 6],
      [plot.right - w - 4, y + 18],
      [plot.left + 6, y + 18],
    ];
    const clear = ([sx, sy]) =>
      !bars.some((b) =>
        overlaps({ x: sx - 4, y: sy - 16, w: w + 8, h: 20 }, { x: b.x, y: b.top - b.room, w: b.w, h: base - b.top + b.room }),
      );
    const [sx, sy] = spots.find(clear) ?? spots[0];
    out.push(text(spec.target.label, sx, sy, { color: C.target }));
  }
  return out.join('');
}

/** The chart as SVG text. `results` is the `results` array of bench/results/<date>.json; `meta` ({ date, cpus }) goes into the title. */
export function renderChart(results, meta = {}) {
  const panels = panelsOf(Array.isArray(results) ? results : []);
  const [w, h] = [W / 2, (H - HEADER) / 2];
  // The plots of one grid row share their top edge: each legend takes the room of the row's tallest.
  const room = (i) => Math.max(...panels.slice(i - (i % 2), i - (i % 2) + 2).map((spec) => 22 * (1 + (spec.notes?.length ?? 0))));
  const body = panels.map((spec, i) => panel(spec, { x: (i % 2) * w, y: HEADER + Math.floor(i / 2) * h, w, h }, room(i)));
  const title = ['Datum benchmark', meta.date, num(meta.cpus) === null ? null : `${meta.cpus} cores`].filter(Boolean).join(' — ');
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`;
  return [
    svg,
    rect(0, 0, W, H, '#fff'),
    text(title, W / 2, 36, { size: 24, bold: true, anchor: 'middle' }),
    ...body,
    '</svg>',
    '',
  ].join('\n');
}

/** Renders the chart and writes it to `file` (its directory exists: the results JSON is in it). */
export const writeChart = (results, file, meta = {}) => writeFile(file, renderChart(results, meta));

if (import.meta.url === pathToFileURL(path.resolve(process.argv[1] ?? '')).href) {
  const file = process.argv[2] ?? '';
  if (!file.endsWith('.json'))
    throw new Error('usage: node bench/chart.mjs bench/results/<date>.json  (writes bench/results/<date>.svg)');
  const { results, machine } = JSON.parse(await readFile(file, 'utf8'));
  await writeChart(results, file.replace(/\.json$/, '.svg'), { date: path.basename(file, '.json'), cpus: machine?.cpus });
}
