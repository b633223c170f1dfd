import { z } from 'zod';
import { withFix } from '../../contract/fix';
import { MAX_ACCOUNT_ID, accountProblem, modeProblem, storedAccount, storedMode } from '../../domain/resources/attributes';
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

/**
 * A file's or a directory's mode: a quoted string of three or four octal digits, stored as four
 * ("750" is "0750", so equal intent hashes equally). A YAML number is refused: YAML 1.2 reads
 * 0750 as the decimal 750, which is not the mode anyone meant.
 */
export const modeField = (type: 'file' | 'directory') =>
  z
    .string({
      error: withFix(
        'mode must be a quoted string of octal digits',
        `write it in quotes, such as mode: "${type === 'file' ? '0640' : '0750'}" (unquoted, YAML reads 0750 as a decimal number)`,
      ),
    })
    .superRefine((text, ctx) => {
      const problem = modeProblem(type, text);
      if (problem)
        ctx.addIssue({
          code: 'custom',
          message: withFix(
            problem,
            type === 'file'
              ? 'declare the permission bits only, such as "0755"; a program that must run with other rights belongs in a package or a unit'
              : 'declare the permission bits, with setgid (2000) or sticky (1000) if wanted, such as "2775"',
          ),
        });
    })
    .transform(storedMode)
    .describe(
      type === 'file'
        ? 'Octal permission bits in quotes, such as "0640" ("640" is the same); setuid, setgid and sticky are refused on a file.'
        : 'Octal mode in quotes, such as "0750" or "2775": permission bits, and setgid (2000) or sticky (1000) if wanted.',
    );

/** A file's or a directory's owner or group: a name, or a numeric id (a YAML number is read as one), stored in plain decimal. */
export const accountField = (what: 'owner' | 'group') =>
  z
    .union([z.string(), z.number().int().nonnegative().max(MAX_ACCOUNT_ID).transform(String)], {
      error: withFix(
        `${what} must be a ${what === 'owner' ? 'user' : 'group'} name or a numeric id`,
        `write it such as ${what}: ${what === 'owner' ? 'daemon' : 'adm'} or ${what}: 1000`,
      ),
    })
    .superRefine((text, ctx) => {
      const problem = accountProblem(what, text);
      if (problem)
        ctx.addIssue({
          code: 'custom',
          message: withFix(problem, `name a ${what === 'owner' ? 'user' : 'group'} of the node, or give its numeric id`),
        });
    })
    .transform(storedAccount)
    .describe(
      `A ${what === 'owner' ? 'user' : 'group'} name of the node, or its numeric id; observed in the same spelling (getent resolves it).`,
    );
