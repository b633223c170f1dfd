import { describe, expect, it } from 'vitest';
import { InvalidDesiredState, nodePathProblem, pathSpellingProblem, type PathSpellingProblem } from '../../src/domain';
import { agentConfig, validateDesiredState } from '../../src/schemas';

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
  { name: 'a directory name of 255 bytes fits', path: `${'d'.repeat(255)}/x`, want: null },
  { name: 'a directory name of 256 bytes', path: `${'d'.repeat(256)}/x`, want: 'segment_too_long' },
  { name: 'a name counted in UTF-8 bytes, not characters', path: `${'é'.repeat(128)}/x`, want: 'segment_too_long' },
  { name: 'a file name that leaves no room for the temp file', path: `etc/${'f'.repeat(224)}`, want: 'name_too_long' },
  { name: 'a file name with room for the temp file', path: `etc/${'f'.repeat(223)}`, want: null },
  {
    name: 'a path longer than PATH_MAX allows',
    path: Array.from({ length: 40 }, () => 'd'.repeat(100)).join('/'),
    want: 'too_long',
  },
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
    expect(nodePathProblem(`etc/${'x'.repeat(300)}/a`)).toMatch(/has a directory name of 300 bytes .*more than the 255 bytes/);
  });
});

describe('names too long for the filesystem are invalid desired state and agent.yaml', () => {
  it('a file resource whose path segment is longer than NAME_MAX fails validation, naming field and fix', () => {
    const doc = {
      node: 'N-1',
      generation: 1,
      resources: { config: { type: 'file', path: `etc/${'a'.repeat(256)}/config.json`, content: 'x' } },
    };
    let error: unknown = null;
    try {
      validateDesiredState(doc, 'desired/nodes/N-1.yaml', 'N-1');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidDesiredState);
    expect(String((error as Error).message)).toMatch(/resources\.config\.path.*directory name of 256 bytes.*fix: shorten/s);
  });

  it('an agent.yaml target whose name is too long is refused', () => {
    const config = agentConfig.safeParse({
      node: 'N-1',
      root: '/var/lib/datum/N-1',
      overrides: { [`file:etc/${'n'.repeat(300)}`]: { approved_by: 'a', reason: 'r', since: '2026-01-01T00:00:00Z' } },
    });
    expect(config.success).toBe(false);
    expect(JSON.stringify(config.error?.issues)).toMatch(/names a path Datum cannot write: .* ends in a file name of 300 bytes/);
  });
});
