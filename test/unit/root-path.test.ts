import { describe, expect, it } from 'vitest';
import { nodePathProblem, pathSpellingProblem, type PathSpellingProblem } from '../../src/domain';

// The one spelling rule the domain and the agent share (src/domain/rootPath.ts).
const rows: Array<{ name: string; path: string; want: PathSpellingProblem | null }> = [
  { name: 'a plain relative path', path: 'etc/app/config.json', want: null },
  { name: 'a rooted path', path: '/etc/passwd', want: 'absolute' },
  { name: 'a backslash-rooted path', path: '\\etc\\passwd', want: 'absolute' },
  { name: 'a drive letter', path: 'C:/x', want: 'absolute' },
  { name: 'a ".." segment', path: 'etc/../../x', want: 'parent_segment' },
  { name: 'a ".." behind a backslash', path: 'etc\\..\\x', want: 'parent_segment' },
  { name: 'the empty path', path: '', want: 'empty' },
  { name: 'a NUL byte', path: 'etc/a\0b', want: 'nul' },
  { name: 'an empty segment', path: 'etc//x', want: 'empty_or_dot_segment' },
  { name: 'a "." segment', path: './x', want: 'empty_or_dot_segment' },
  { name: 'leaving the root outranks being malformed', path: '/etc/a\0b', want: 'absolute' },
];

describe('pathSpellingProblem', () => {
  it.each(rows)('$name', ({ path, want }) => {
    expect(pathSpellingProblem(path)).toBe(want);
  });
});

describe('nodePathProblem', () => {
  it('adds the reserved entries on top of the spelling', () => {
    expect(nodePathProblem('.datum/journal')).toMatch(/inside "\.datum"/);
    expect(nodePathProblem('etc/app.json')).toBeNull();
  });

  it('words each spelling problem for desired-state validation', () => {
    expect(nodePathProblem('')).toBe('is empty');
    expect(nodePathProblem('a\0')).toBe('contains a NUL byte');
    expect(nodePathProblem('/x')).toBe('"/x" is absolute and would leave the node root');
    expect(nodePathProblem('a/../b')).toBe('"a/../b" has a ".." segment and could leave the node root');
    expect(nodePathProblem('a//b')).toBe('"a//b" has an empty or "." segment');
  });
});
