import { describe, expect, it } from 'vitest';
import { summaryLine } from '../../src/workflows/summaries';

describe('activity and timer summaries', () => {
  it('keep a hostile resource key to one short line', () => {
    const line = summaryLine(`apply file.write a\nb\u2028c\u0007d ${'x'.repeat(5000)}`);
    for (const c of ['\n', '\u2028', '\u0007']) expect(line).not.toContain(c);
    expect(line.length).toBeLessThanOrEqual(120);
    expect(line.endsWith('…')).toBe(true);
  });

  it('leave an ordinary summary as it is', () => {
    expect(summaryLine('observe N-24')).toBe('observe N-24');
    expect(summaryLine('apply file.write app\tconfig')).toBe('apply file.write app config');
  });
});
