import { z } from 'zod';
import { withFix } from '../../contract/fix';
import { hasParentSegment, nodePathProblem, pathSpellingProblem, type PathSpellingProblem } from '../../domain/rootPath';

/* What several resource types' schemas share: a version, a path under the root, an artifact and its digest. */

export const VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,62}$/;
const SHA256_HEX = /^[a-f0-9]{64}$/;
const TOO_LONG: readonly (PathSpellingProblem | null)[] = ['too_long', 'segment_too_long', 'name_too_long'];

export const nodePath = z.string().superRefine((p, ctx) => {
  const problem = nodePathProblem(p);
  if (problem)
    ctx.addIssue({
      code: 'custom',
      message: withFix(
        problem,
        TOO_LONG.includes(pathSpellingProblem(p))
          ? 'shorten the path or the name named, so the file can exist on the node'
          : 'write a path relative to the node root, such as "etc/app/config.json"',
      ),
    });
});

export const sha256Field = z
  .string({ error: withFix('the artifact digest is missing', 'add sha256: <hex sha256 of the archive> (sha256sum prints it)') })
  .regex(SHA256_HEX, withFix('is not a hex sha256', 'write the 64 lowercase hex digits that sha256sum prints for the archive'));

export const artifactRef = z
  .string({
    error: withFix(
      'the artifact is missing',
      'name the release archive: a path under the fleet directory, an absolute path or an http(s) URL',
    ),
  })
  .superRefine((ref, ctx) => {
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(ref);
    if (scheme && !/^https?$/i.test(scheme[1] ?? '')) {
      ctx.addIssue({
        code: 'custom',
        message: withFix(`the artifact scheme "${scheme[1]}" is not supported`, 'use an http(s) URL or a file path'),
      });
    } else if (!scheme && hasParentSegment(ref)) {
      ctx.addIssue({
        code: 'custom',
        message: withFix(
          `"${ref}" has a ".." segment`,
          'reference artifacts under the fleet directory (artifacts/…), by absolute path or by URL',
        ),
      });
    }
  });
