/** A plain-text table: column widths from the content, no colours (pipes and logs stay readable). */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : (c ?? '').padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export function print(text: string): void {
  process.stdout.write(`${text}\n`);
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
