/*
 * Text output is for a terminal, and much of what it shows comes from nodes and from outside (paths,
 * symlink targets, evidence, notes, names): such text must not drive the terminal. terminalSafe
 * writes every control character (C0 but newline and tab, DEL, C1) and every bidirectional control
 * (which can make a line read as another) as a visible escape, \x1b or \u202e, and print, table and
 * the error writer pass everything through it. JSON output is exact: JSON.stringify escapes control
 * characters itself, and a program reading it gets the bytes as they are.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** `text` with every character that could drive a terminal (or reorder a line) written as its escape. */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** One field of node-controlled text on one line: terminal-safe, and its line breaks shown as \n (a line it holds cannot pass for output). */
export const oneLine = (text: string): string => terminalSafe(text).replace(/\r?\n/g, '\\n');

/** A plain-text table: column widths from the content, no colours (pipes and logs stay readable). */
export function table(headers: string[], rawRows: string[][]): string {
  const rows = rawRows.map((r) => r.map((c) => oneLine(c ?? '')));
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : (c ?? '').padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export function print(text: string): void {
  process.stdout.write(`${terminalSafe(text)}\n`);
}

export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '-';
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 90) return `${s}s ago`;
  if (s < 90 * 60) return `${Math.round(s / 60)}m ago`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

export function short(value: unknown, max = 60): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  if (text === undefined) return '-';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** One document: indented JSON for -o json, a single line for -o jsonl. */
export function printDocument(format: 'json' | 'jsonl', value: unknown): void {
  process.stdout.write(format === 'json' ? `${JSON.stringify(value, null, 2)}\n` : `${JSON.stringify(value)}\n`);
}

/** A line of a jsonl stream: one object, one line, written as soon as it is known (progress for scripts). */
export function printLine(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}
