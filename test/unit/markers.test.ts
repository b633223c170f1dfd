// sameMarker: how the agent and the loop compare change markers across the agent upgrade that
// added ctime and a digest to a regular file's marker (issue 18, hole 10a). One row per case.

import { describe, expect, it } from 'vitest';
import { sameMarker } from '../../src/domain';

const LEGACY = 'file:1764417600123.456:42:9';
const FULL = `${LEGACY}:1764417600200:0123456789abcdef`;
const NO_DIGEST = `${LEGACY}:1764417600200`;

describe('sameMarker', () => {
  it.each<[string, string | null, string | null, boolean]>([
    ['the same full marker', FULL, FULL, true],
    ['a marker of an agent before ctime and digest, and the full one of the same file', LEGACY, FULL, true],
    ['the watch’s marker (no digest) and the observation’s', NO_DIGEST, FULL, true],
    ['another ctime: a writer that put mtime back (touch -r)', FULL, `${LEGACY}:1764417600999:0123456789abcdef`, false],
    ['another digest: new bytes within one tick of ctime', FULL, `${LEGACY}:1764417600200:fedcba9876543210`, false],
    ['another mtime, even against a legacy marker', LEGACY, 'file:1764417600124.456:42:9:1764417600200:0123456789abcdef', false],
    ['another inode', LEGACY, 'file:1764417600123.456:43:9', false],
    ['a symlink’s markers compare whole', 'link:releases/7.4:1764417600500', 'link:releases/7.4:1764417600501', false],
    ['absent and absent', 'absent', 'absent', true],
    ['none and a marker', null, LEGACY, false],
    ['none and none', null, null, true],
    ['a service’s markers compare whole', 'pid:4242:998877', 'pid:4242:998877', true],
  ])('%s', (_name, a, b, same) => {
    expect(sameMarker(a, b)).toBe(same);
    expect(sameMarker(b, a)).toBe(same);
  });
});
