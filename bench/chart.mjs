// The benchmark's results as a PNG chart, with no dependency beyond Node: a 5×7 bitmap font, a
// few raster primitives, and a PNG encoder over node:zlib. bench/run.mjs calls writeChart after
// it writes bench/results/<date>.json; the chart reads the same rows.
//
//   import { writeChart } from './chart.mjs';
//   await writeChart(results, 'bench/results/2026-11-29.png', { date: '2026-11-29', cpus: 2 });

import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { deflateSync } from 'node:zlib';

const WIDTH = 1200;
const HEIGHT = 800;

const COLORS = {
  background: [255, 255, 255],
  text: [34, 34, 34],
  muted: [120, 120, 120],
  axis: [80, 80, 80],
  grid: [228, 228, 228],
  target: [205, 35, 35],
  floor: [150, 150, 150],
  ceiling: [96, 124, 160],
  watch: [31, 119, 180],
  watchLight: [150, 196, 230],
  poll: [230, 115, 20],
  pollLight: [250, 190, 130],
};

// ---------------------------------------------------------------------------------------------
// Font: 5 columns × 9 rows per glyph (rows 0-6 sit on the baseline, rows 7-8 are descenders).
// Each row is one base-32 digit whose 5 bits are the columns, leftmost in the high bit; a glyph
// is 9 digits. ASCII_GLYPHS holds printable ASCII 32..126 in code order.

const GLYPH_ROWS = 9;
const GLYPH_COLS = 5;
const SPACE_WIDTH = 3;
const CAP_HEIGHT = 7;

const ASCII_GLYPHS =
  '000000000444440400aaa000000aavavaa004fke5u400op248j300cik8lid00448000000' + //  !"#$%&'
  '24888420084222480004lel4000044v4400000000c480000e0000000000cc0001248g000' + // ()*+,-./
  'ehjlphe004c4444e00eh1248v00v2421he0026aiv2200vgu11he0068guhhe00v12488800' + // 01234567
  'ehhehhe00ehhf12c000cc0cc0000cc0c4800248g8420000v0v0000842124800eh1240400' + // 89:;<=>?
  'eh1dlle00ehhvhhh00uhhuhhu00ehggghe00sihhhis00vgguggv00vgguggg00ehgnhhf00' + // @ABCDEFG
  'hhhvhhh00e44444e0072222ic00hikokih00ggggggv00hrllhhh00hhpljhh00ehhhhhe00' + // HIJKLMNO
  'uhhuggg00ehhhlid00uhhukih00fgge11u00v44444400hhhhhhe00hhhhha400hhhllla00' + // PQRSTUVW
  'hha4ahh00hha444400v1248gv00e88888e000g8421000e22222e004ah0000000000000v0' + // XYZ[\]^_
  '84200000000e1fhf00ggmphhu0000egghe0011djhhf0000ehvge00698s8880000fhhhf1e' + // `abcdefg
  'ggmphhh0040c444e002062222icggikoki00c44444e0000qllll0000mphhh0000ehhhe00' + // hijklmno
  '00uhhhugg00fhhhf1100mpggg0000fge1u0088s88960000hhhjd0000hhha40000hhlla00' + // pqrstuvw
  '00ha4ah0000hhhhf1e00v248v00244844200444444400844244800008l20000'; //          xyz{|}~

const EXTRA_GLYPHS = {
  '×': '0ha4ah000',
  '≤': '3cgc30v00',
  '→': '042v24000',
  '—': '000v00000',
};

const glyphCache = new Map();

/**
 * The glyph's rows (bit masks), its first lit column and its width in columns; characters the
 * font lacks render as '?'. Spacing is proportional, which reads better, except for digits:
 * they keep the full cell so that numbers of equal length have equal width.
 */
function glyph(ch) {
  const cached = glyphCache.get(ch);
  if (cached) return cached;
  const code = ch.codePointAt(0);
  const digits = code >= 32 && code <= 126 ? ASCII_GLYPHS.slice((code - 32) * GLYPH_ROWS, (code - 31) * GLYPH_ROWS) : EXTRA_GLYPHS[ch];
  if (digits === undefined) return glyph('?');
  const rows = [...digits].map((d) => parseInt(d, 32));
  const lit = rows.reduce((a, r) => a | r, 0);
  const litColumns = [...Array(GLYPH_COLS).keys()].filter((col) => lit & (1 << (GLYPH_COLS - 1 - col)));
  let g;
  if (litColumns.length === 0) g = { rows, first: 0, width: SPACE_WIDTH };
  else if (ch >= '0' && ch <= '9') g = { rows, first: 0, width: GLYPH_COLS };
  else g = { rows, first: litColumns[0], width: litColumns[litColumns.length - 1] - litColumns[0] + 1 };
  glyphCache.set(ch, g);
  return g;
}

/** Width in pixels of `str` drawn at `scale`, without the trailing inter-glyph gap. */
function textWidth(str, scale) {
  let columns = -1;
  for (const ch of str) columns += glyph(ch).width + 1;
  return Math.max(0, columns) * scale;
}

// ---------------------------------------------------------------------------------------------
// Raster: an RGB buffer with the primitives the chart needs. Coordinates are rounded to whole
// pixels and clipped to the canvas.

class Canvas {
  constructor(width, height, background) {
    this.width = width;
    this.height = height;
    this.rgb = Buffer.alloc(width * height * 3);
    this.fillRect(0, 0, width, height, background);
  }

  pixel(x, y, [r, g, b]) {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    const i = (y * this.width + x) * 3;
    this.rgb[i] = r;
    this.rgb[i + 1] = g;
    this.rgb[i + 2] = b;
  }

  fillRect(x, y, w, h, color) {
    const x0 = Math.max(0, Math.round(x));
    const y0 = Math.max(0, Math.round(y));
    const x1 = Math.min(this.width, Math.round(x + w));
    const y1 = Math.min(this.height, Math.round(y + h));
    for (let py = y0; py < y1; py++) for (let px = x0; px < x1; px++) this.pixel(px, py, color);
  }

  line(x0, y0, x1, y1, color) {
    for (const [x, y] of bresenham(x0, y0, x1, y1)) this.pixel(x, y, color);
  }

  /** A dashed line `thickness` pixels wide, drawn below and right of the ideal line. */
  dashedLine(x0, y0, x1, y1, color, { dash = 8, gap = 5, thickness = 1 } = {}) {
    let i = 0;
    for (const [x, y] of bresenham(x0, y0, x1, y1)) {
      if (i++ % (dash + gap) < dash) for (let t = 0; t < thickness; t++) this.pixel(x0 === x1 ? x + t : x, x0 === x1 ? y : y + t, color);
    }
  }

  /** Blends `color` over the pixel with opacity `alpha` (0..1). */
  blend(x, y, color, alpha) {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    const i = (y * this.width + x) * 3;
    for (let c = 0; c < 3; c++) this.rgb[i + c] = Math.round(this.rgb[i + c] * (1 - alpha) + color[c] * alpha);
  }

  /**
   * Text whose cap top is at `y`; `align` says what `x` is: the left edge, centre or right edge.
   * A half-integer `scale` is drawn at twice that size and averaged over 2×2 blocks: anti-aliased
   * text between the integer sizes, for labels that must fit narrow bars.
   */
  text(str, x, y, { scale = 1, color = COLORS.text, align = 'left', bold = false } = {}) {
    const ss = Number.isInteger(scale) ? 1 : 2;
    const k = Math.round(scale * ss);
    const w = textWidth(str, scale);
    const left = Math.round(align === 'center' ? x - w / 2 : align === 'right' ? x - w : x);
    const top = Math.round(y);
    // Whole blocks of ss×ss, with room for the bold stroke at the end.
    const maskW = Math.ceil((textWidth(str, k) + ss) / ss) * ss;
    const maskH = Math.ceil((GLYPH_ROWS * k) / ss) * ss;
    const mask = new Uint8Array(maskW * maskH);
    let cx = 0;
    for (const ch of str) {
      const { rows, first, width } = glyph(ch);
      for (let row = 0; row < GLYPH_ROWS; row++) {
        for (let col = first; col < first + width; col++) {
          if (!(rows[row] & (1 << (GLYPH_COLS - 1 - col)))) continue;
          // Bold widens each stroke by one pixel; the inter-glyph gap keeps letters apart.
          const x0 = cx + (col - first) * k;
          for (let my = row * k; my < (row + 1) * k; my++) mask.fill(1, my * maskW + x0, my * maskW + x0 + k + (bold ? ss : 0));
        }
      }
      cx += (width + 1) * k;
    }
    for (let py = 0; py < maskH / ss; py++) {
      for (let px = 0; px < maskW / ss; px++) {
        let covered = 0;
        for (let dy = 0; dy < ss; dy++) for (let dx = 0; dx < ss; dx++) covered += mask[(py * ss + dy) * maskW + px * ss + dx];
        if (covered > 0) this.blend(left + px, top + py, color, covered / (ss * ss));
      }
    }
  }

  png() {
    return encodePng(this.width, this.height, this.rgb);
  }
}

function* bresenham(x0, y0, x1, y1) {
  let x = Math.round(x0);
  let y = Math.round(y0);
  const xe = Math.round(x1);
  const ye = Math.round(y1);
  const dx = Math.abs(xe - x);
  const dy = -Math.abs(ye - y);
  const sx = x < xe ? 1 : -1;
  const sy = y < ye ? 1 : -1;
  let err = dx + dy;
  for (;;) {
    yield [x, y];
    if (x === xe && y === ye) return;
    const e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y += sy;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// PNG: 8-bit RGB, one IDAT, every scanline with filter 0 (none). Charts are mostly flat colour,
// so deflate alone keeps the file small.

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(buf) {
  let c = 0xffffffff;
  for (const byte of buf) c = CRC_TABLE[(c ^ byte) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function pngChunk(type, data) {
  const typeAndData = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(typeAndData));
  return Buffer.concat([length, typeAndData, crc]);
}

function encodePng(width, height, rgb) {
  const stride = width * 3;
  const scanlines = Buffer.alloc((stride + 1) * height); // each line: filter byte 0, then pixels
  for (let y = 0; y < height; y++) rgb.copy(scanlines, y * (stride + 1) + 1, y * stride, (y + 1) * stride);
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // colour type: RGB
  // compression, filter method and interlace stay 0
  return Buffer.concat([PNG_SIGNATURE, pngChunk('IHDR', header), pngChunk('IDAT', deflateSync(scanlines)), pngChunk('IEND', Buffer.alloc(0))]);
}

// ---------------------------------------------------------------------------------------------
// Chart: four grouped-bar panels in a 2×2 grid, one group per fleet size.

const TITLE_SCALE = 3;
const PANEL_TITLE_SCALE = 2;
const AXIS_SCALE = 2;
const LEGEND_SCALE = 2;
const HEADER_HEIGHT = 56;
const PAD = 14;

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

function mean(values) {
  const present = values.map(num).filter((v) => v !== null);
  return present.length === 0 ? null : present.reduce((a, b) => a + b, 0) / present.length;
}

/** Bar values: three significant figures (whole seconds from 100 up), never exponent notation. */
function formatValue(v) {
  if (v === null) return 'n/a';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  if (a >= 0.01) return v.toFixed(2);
  return v.toPrecision(1);
}

/** Tick values are 1-2-5 multiples; toPrecision strips the float noise of repeated addition. */
const formatTick = (v) => String(Number(v.toPrecision(6)));

function niceStep(raw) {
  const p = 10 ** Math.floor(Math.log10(raw));
  const m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/** The 1-2-5 value following `v` (…, 0.5, 1, 2, 5, 10, …). */
function next125(v) {
  const p = 10 ** Math.floor(Math.log10(v) + 1e-9);
  const m = Math.round(v / p);
  return m < 2 ? 2 * p : m < 5 ? 5 * p : 10 * p;
}

/** The 1-2-5 value preceding `v`, which must itself be one. */
function prev125(v) {
  const p = 10 ** Math.floor(Math.log10(v) + 1e-9);
  const m = Math.round(v / p);
  return m <= 1 ? p / 2 : m <= 2 ? p : 2 * p;
}

/** The largest 1-2-5 value not above `v`. */
function floor125(v) {
  const p = 10 ** Math.floor(Math.log10(v) + 1e-9);
  const m = v / p;
  return (m >= 5 - 1e-9 ? 5 : m >= 2 - 1e-9 ? 2 : 1) * p;
}

/**
 * A y scale from plot top to plot bottom. `fits(scale)` says whether the labels above the bars
 * and the target's label still fit under the plot's top edge; the range grows until they do.
 */
function yScale(kind, values, top, bottom, fits) {
  const present = values.filter((v) => v !== null);
  const make = (lo, hi, ticks) => {
    const span = kind === 'log' ? Math.log10(hi / lo) : hi - lo;
    const at = (v) => {
      const t = kind === 'log' ? Math.log10(Math.max(v, lo) / lo) / span : (v - lo) / span;
      return bottom - Math.min(1, Math.max(0, t)) * (bottom - top);
    };
    return { lo, hi, ticks, at };
  };
  if (kind === 'log') {
    const positive = present.filter((v) => v > 0);
    // One 1-2-5 step below the smallest value, so that its bar is visible, not a sliver.
    const lo = positive.length === 0 ? 0.1 : prev125(floor125(Math.min(...positive)));
    let hi = positive.length === 0 ? 10 : next125(Math.max(...positive));
    for (let i = 0; i < 8 && !fits(make(lo, hi, [])); i++) hi = next125(hi);
    return make(lo, hi, logTicks(lo, hi));
  }
  const max = Math.max(0, ...present);
  const step = niceStep(max > 0 ? max / 5 : 1);
  let hi = Math.max(step, Math.ceil(max / step - 1e-9) * step);
  for (let i = 0; i < 20 && !fits(make(0, hi, [])); i++) hi += step;
  return make(0, hi, linearTicks(hi, step));
}

function linearTicks(hi, step) {
  const ticks = [];
  for (let v = 0; v <= hi + step / 1e6; v += step) ticks.push(v);
  return ticks;
}

/** 1-2-5 ticks, or decades alone when that would crowd the axis. */
function logTicks(lo, hi) {
  const ticks = [];
  for (let v = lo; v <= hi * (1 + 1e-9); v = next125(v)) ticks.push(v);
  if (ticks.length <= 8) return ticks;
  return ticks.filter((v) => Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9);
}

const intersects = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/** Splits `text` at spaces into lines no wider than `width` (a single word may still be wider). */
function wrap(text, width, scale) {
  const lines = [];
  for (const word of text.split(' ')) {
    const last = lines.length - 1;
    if (last >= 0 && textWidth(`${lines[last]} ${word}`, scale) <= width) lines[last] = `${lines[last]} ${word}`;
    else lines.push(word);
  }
  return lines;
}

const SWATCH = 7 * LEGEND_SCALE;

/**
 * Legend entries ({ name, color?, dashed? }) laid out left to right, wrapping to a new row when
 * the panel is full. An entry without a colour is a note: text only.
 */
function layoutLegend(entries, x, y, width) {
  const rowHeight = 11 * LEGEND_SCALE;
  const placed = [];
  let cx = x;
  let cy = y;
  for (const entry of entries) {
    const w = (entry.color ? SWATCH + 8 : 0) + textWidth(entry.name, LEGEND_SCALE);
    if (cx > x && cx + w > x + width) {
      cx = x;
      cy += rowHeight;
    }
    placed.push({ ...entry, x: cx, y: cy });
    cx += w + 20;
  }
  return { placed, height: entries.length === 0 ? 0 : cy - y + rowHeight };
}

function drawLegend(canvas, placed) {
  for (const { name, color, dashed, x, y } of placed) {
    if (!color) {
      canvas.text(name, x, y, { scale: LEGEND_SCALE, color: COLORS.muted });
      continue;
    }
    if (dashed) canvas.dashedLine(x, y + SWATCH / 2 - 1, x + SWATCH, y + SWATCH / 2 - 1, color, { dash: 4, gap: 3, thickness: 2 });
    else canvas.fillRect(x, y, SWATCH, SWATCH, color);
    canvas.text(name, x + SWATCH + 8, y, { scale: LEGEND_SCALE });
  }
}

function legendEntries(spec, withTarget) {
  const entries = [...spec.series, ...(spec.notes ?? []).map((name) => ({ name }))];
  return withTarget && spec.target ? [...entries, { name: spec.target.label, color: COLORS.target, dashed: true }] : entries;
}

/** The panel's content box: the panel less its padding. */
const innerOf = (box) => ({ x: box.x + PAD, y: box.y + PAD, w: box.w - 2 * PAD, h: box.h - 2 * PAD });
const legendTopOf = (inner) => inner.y + CAP_HEIGHT * PANEL_TITLE_SCALE + 12;

/** Value labels are drawn at the largest of these scales whose labels fit their bars. */
const VALUE_SCALES = [2, 1.5, 1];
/** The target's label is never smaller than this, however narrow the bars. */
const TARGET_MIN_SCALE = 1.5;
const TICK_LABEL_WIDTH = 52;
/** Bars stay this narrow however few there are, so that a single fleet size reads as bars. */
const MAX_SLOT_WIDTH = 96;

/** Where everything in a panel goes: the target's label goes into the legend only when no spot
 * next to its line is free. `legendHeight` is the least height the legend takes. */
function planPanel(box, spec, legendHeight) {
  const onLine = layoutPanel(box, spec, legendHeight, false);
  return spec.target && !onLine.empty && !onLine.targetSpot ? layoutPanel(box, spec, legendHeight, true) : onLine;
}

/**
 * Where everything in a panel goes. With `targetInLegend` false the target's label must find a
 * free spot next to its line; `targetSpot` is null when it could not.
 */
function layoutPanel(box, spec, legendHeight, targetInLegend) {
  const { series, groups, target } = spec;
  const inner = innerOf(box);
  const legendTop = legendTopOf(inner);
  const legend = layoutLegend(legendEntries(spec, targetInLegend), inner.x, legendTop, inner.w);
  if (groups.every((g) => g.bars.every((b) => num(b.value) === null))) return { empty: true, legend };
  const plot = {
    left: inner.x + TICK_LABEL_WIDTH,
    right: inner.x + inner.w - 4,
    top: legendTop + Math.max(legend.height, legendHeight) + 10,
    bottom: inner.y + inner.h - CAP_HEIGHT * AXIS_SCALE - 12,
  };
  const groupW = (plot.right - plot.left) / groups.length;
  const slotW = Math.min(MAX_SLOT_WIDTH, Math.floor((groupW - 2 * Math.max(6, groupW * 0.04)) / series.length));
  const margin = (groupW - slotW * series.length) / 2;

  const place = (valueScale) => {
    const bars = groups.flatMap((group, gi) =>
      group.bars.map((bar, bi) => {
        const value = num(bar.value);
        const notes = value === null ? [] : (bar.notes ?? []).flatMap((note) => wrap(note, slotW - 4, valueScale));
        const x = plot.left + gi * groupW + margin + bi * slotW;
        return { value, x, w: slotW - 2, color: series[bi].color, lines: [...notes, formatValue(value)] };
      }),
    );
    const lineHeight = Math.ceil(CAP_HEIGHT * valueScale) + 4;
    const labelHeight = (bar) => bar.lines.length * lineHeight + 2;
    const targetHeight = CAP_HEIGHT * Math.max(TARGET_MIN_SCALE, valueScale) + 8;
    const values = bars.map((b) => b.value);
    const scale = yScale(spec.scale ?? 'linear', target ? [...values, target.value] : values, plot.top, plot.bottom, (s) =>
      bars.every((b) => b.value === null || s.at(b.value) - labelHeight(b) >= plot.top) && (!target || s.at(target.value) - targetHeight >= plot.top),
    );
    const base = Math.round(scale.at(scale.lo));
    for (const bar of bars) {
      bar.top = bar.value === null ? base : Math.round(scale.at(bar.value));
      bar.labelY = bar.top - lineHeight * bar.lines.length + 2;
      bar.labelBoxes = bar.lines.map((line, i) => {
        const w = textWidth(line, valueScale);
        return { x: bar.x + bar.w / 2 - w / 2, y: bar.labelY + i * lineHeight, w, h: CAP_HEIGHT * valueScale };
      });
    }
    return { bars, valueScale, lineHeight, scale, base };
  };
  // The largest value scale at which no label comes within 6 px (sideways) of another bar's
  // labels, closer than which neighbouring numbers read as one, nor within 2 px of another bar.
  // A label may be wider than its bar when its neighbours sit at another height.
  const near = (box, pad, other) => intersects({ x: box.x - pad, y: box.y - pad / 2, w: box.w + 2 * pad, h: box.h + pad }, other);
  const clear = ({ bars }) =>
    bars.every((a) =>
      a.labelBoxes.every((box) =>
        bars.every(
          (b) => b === a || (!near(box, 2, { x: b.x, y: b.top, w: b.w, h: Infinity }) && !b.labelBoxes.some((o) => near(box, 6, o))),
        ),
      ),
    );
  let placed;
  for (const valueScale of VALUE_SCALES) {
    placed = place(valueScale);
    if (clear(placed)) break;
  }
  const { bars, valueScale, lineHeight, scale, base } = placed;
  // Bars and their labels, as rectangles the target's label must not cover.
  const occupied = bars.flatMap((b) => [{ x: b.x, y: b.top, w: b.w, h: base - b.top }, ...b.labelBoxes]);

  const targetScale = Math.max(TARGET_MIN_SCALE, valueScale);
  let targetSpot = null;
  if (target && !targetInLegend) {
    const y = Math.round(scale.at(target.value));
    const w = textWidth(target.label, targetScale);
    const h = CAP_HEIGHT * targetScale;
    // Above the line, then below; at the right end, then the left.
    targetSpot =
      [
        { x: plot.right - w - 4, y: y - h - 6 },
        { x: plot.left + 6, y: y - h - 6 },
        { x: plot.right - w - 4, y: y + 7 },
        { x: plot.left + 6, y: y + 7 },
      ].find(
        (c) => c.y >= plot.top && c.y + h < base && !occupied.some((o) => intersects({ x: c.x - 4, y: c.y - 4, w: w + 8, h: h + 8 }, o)),
      ) ?? null;
  }
  return { empty: false, legend, plot, groupW, bars, valueScale, lineHeight, scale, base, targetSpot, targetScale };
}

/**
 * One panel, as `planPanel` laid it out: `spec.series` names the bars of every group (legend text
 * and colour), each group has one bar per series ({ value, notes }), `spec.target` is an optional
 * dashed line, `spec.notes` extra legend text.
 */
function drawPanel(canvas, box, spec, layout) {
  const { title, groups, target } = spec;
  canvas.text(title, box.x + PAD, box.y + PAD, { scale: PANEL_TITLE_SCALE, bold: true });
  if (layout.empty) {
    drawLegend(canvas, layout.legend.placed);
    canvas.text('no data', box.x + box.w / 2, box.y + box.h / 2, { scale: AXIS_SCALE, color: COLORS.muted, align: 'center' });
    return;
  }
  const { legend, plot, groupW, bars, valueScale, lineHeight, scale, base, targetSpot, targetScale } = layout;

  for (const tick of scale.ticks) {
    const y = Math.round(scale.at(tick));
    canvas.line(plot.left, y, plot.right, y, COLORS.grid);
    canvas.text(formatTick(tick), plot.left - 8, y - (CAP_HEIGHT * AXIS_SCALE) / 2, { scale: AXIS_SCALE, align: 'right', color: COLORS.axis });
  }
  for (const bar of bars) {
    if (bar.value !== null) canvas.fillRect(bar.x, bar.top, bar.w, base - bar.top, bar.color);
    // Notes (the rollout's ratio) take the bar's colour, which sets them apart from the value.
    bar.lines.forEach((line, i) => {
      const color = bar.value === null ? COLORS.muted : i < bar.lines.length - 1 ? bar.color : COLORS.text;
      canvas.text(line, bar.x + bar.w / 2, bar.labelY + i * lineHeight, { scale: valueScale, color, align: 'center' });
    });
  }
  canvas.line(plot.left, plot.top, plot.left, base, COLORS.axis);
  canvas.line(plot.left, base, plot.right, base, COLORS.axis);
  groups.forEach((group, gi) => {
    canvas.text(group.label, plot.left + (gi + 0.5) * groupW, base + 10, { scale: AXIS_SCALE, align: 'center' });
  });
  if (target) {
    const y = Math.round(scale.at(target.value));
    canvas.dashedLine(plot.left + 1, y, plot.right, y, COLORS.target, { thickness: 2 });
    if (targetSpot) canvas.text(target.label, targetSpot.x, targetSpot.y, { scale: targetScale, color: COLORS.target });
  }
  drawLegend(canvas, legend.placed);
}

/** The four panels' data, one group per fleet size present in `results`. */
function panelsOf(results) {
  const sizes = [...new Set(results.map((r) => num(r.nodes)).filter((n) => n !== null))].sort((a, b) => a - b);
  const rowOf = (nodes, mode) => results.find((r) => r.nodes === nodes && r.mode === mode) ?? {};
  const groupsOf = (barsOf) => sizes.map((nodes) => ({ label: `${nodes} nodes`, bars: barsOf(nodes) }));
  const modes = ['watch', 'poll'];
  const percentiles = (p50, p99) => (nodes) => modes.flatMap((mode) => [{ value: rowOf(nodes, mode)[p50] }, { value: rowOf(nodes, mode)[p99] }]);
  const percentileSeries = [
    { name: 'watch p50', color: COLORS.watch },
    { name: 'watch p99', color: COLORS.watchLight },
    { name: 'poll p50', color: COLORS.poll },
    { name: 'poll p99', color: COLORS.pollLight },
  ];
  // The ratio is the headline of the rollout panel. Whole numbers from 10× up: a tenth is noise
  // there, and the shorter label fits a bar at a readable size.
  const overFloor = (row) => {
    const r = num(row.datum_over_floor);
    return r === null ? [] : [`${r >= 10 ? r.toFixed(0) : r.toFixed(1)}×`];
  };

  return [
    {
      title: 'Full rollout (s)',
      series: [
        { name: 'floor', color: COLORS.floor },
        { name: 'no-op ceiling', color: COLORS.ceiling },
        { name: 'Datum watch', color: COLORS.watch },
        { name: 'Datum poll', color: COLORS.poll },
      ],
      notes: ['n× = Datum / floor'],
      groups: groupsOf((nodes) => {
        const watch = rowOf(nodes, 'watch');
        const poll = rowOf(nodes, 'poll');
        // One floor run per size, so both rows carry the same floor_s. The ceiling is measured
        // inside each mode's run; the bar shows their mean.
        return [
          { value: num(watch.floor_s) ?? num(poll.floor_s) },
          { value: mean([watch.ceiling_s, poll.ceiling_s]) },
          { value: watch.rollout_s, notes: overFloor(watch) },
          { value: poll.rollout_s, notes: overFloor(poll) },
        ];
      }),
    },
    {
      title: 'Verification pass (s)',
      series: [
        { name: 'watch', color: COLORS.watch },
        { name: 'poll', color: COLORS.poll },
      ],
      groups: groupsOf((nodes) => modes.map((mode) => ({ value: rowOf(nodes, mode).verification_pass_s }))),
      target: { value: 30, label: 'target 30 s (1000 nodes)' },
    },
    {
      title: 'Drift detection, edit → ledger (s, log)',
      series: percentileSeries,
      groups: groupsOf(percentiles('detection_p50_s', 'detection_p99_s')),
      target: { value: 2, label: 'target p99 ≤ 2 s' },
      scale: 'log',
    },
    {
      title: 'Per-node convergence (s)',
      series: percentileSeries,
      groups: groupsOf(percentiles('convergence_p50_s', 'convergence_p99_s')),
    },
  ];
}

/**
 * The chart as a PNG. `results` is the `results` array of bench/results/<date>.json; `meta`
 * ({ date, cpus }, both optional) goes into the title.
 */
export function renderChart(results, meta = {}) {
  const canvas = new Canvas(WIDTH, HEIGHT, COLORS.background);
  const cores = num(meta.cpus) === null ? null : `${meta.cpus} cores`;
  const title = ['Datum benchmark', meta.date, cores].filter(Boolean).join(' — ');
  canvas.text(title, WIDTH / 2, 16, { scale: TITLE_SCALE, bold: true, align: 'center' });

  const panels = panelsOf(Array.isArray(results) ? results : []);
  const w = WIDTH / 2;
  const h = (HEIGHT - HEADER_HEIGHT) / 2;
  const boxes = panels.map((_, i) => ({ x: (i % 2) * w, y: HEADER_HEIGHT + Math.floor(i / 2) * h, w, h }));
  // The plots of one grid row share their top edge: each legend takes the height of the row's
  // tallest, counting a target's label that had to move into its legend.
  const rowMax = (heights, i) => Math.max(heights[i - (i % 2)], heights[i - (i % 2) + 1] ?? 0);
  const legendHeights = (least) => panels.map((spec, i) => planPanel(boxes[i], spec, least(i)).legend.height);
  const natural = legendHeights(() => 0);
  const settled = legendHeights((i) => rowMax(natural, i));
  panels.forEach((spec, i) => drawPanel(canvas, boxes[i], spec, planPanel(boxes[i], spec, rowMax(settled, i))));
  return canvas.png();
}

/** Renders the chart and writes it to `file`, creating the directory if needed. */
export async function writeChart(results, file, meta = {}) {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, renderChart(results, meta));
}
