import { z } from 'zod';
import type { PackageSpec } from '../../contract/desired';
import { withFix } from '../../contract/fix';
import { debianVersionProblem, packageNameProblem } from '../../domain/resources';
import { exactly } from '../base';
import { artifactRef, sha256Field } from './fields';

const packageName = z
  .string({ error: withFix('the package name is missing', 'add name: <Debian package name>, such as nginx') })
  .superRefine((name, ctx) => {
    const problem = packageNameProblem(name);
    if (problem)
      ctx.addIssue({
        code: 'custom',
        message: withFix(
          `"${name}" ${problem}`,
          'write the Debian package name, such as nginx or libssl3 (lower case letters, digits, "+", "-", ".")',
        ),
      });
  });

const debianVersion = z
  .string({ error: withFix('the package version is missing', 'add version: <the exact Debian version>, such as "1.24.0-2"') })
  .superRefine((version, ctx) => {
    const problem = debianVersionProblem(version);
    if (problem)
      ctx.addIssue({
        code: 'custom',
        message: withFix(
          `"${version}" ${problem}`,
          'write the exact version dpkg reports (dpkg-query -W -f=\'${Version}\' <name>), such as "1.24.0-2" or "1:2.3-1"',
        ),
      });
  });

/** A .deb is only ever installed with the digest that pins it; a digest without a .deb pins nothing. */
function paired(spec: { artifact?: string; sha256?: string }, ctx: z.RefinementCtx): void {
  if ((spec.artifact === undefined) === (spec.sha256 === undefined)) return;
  ctx.addIssue({
    code: 'custom',
    path: [spec.artifact === undefined ? 'artifact' : 'sha256'],
    message:
      spec.artifact === undefined
        ? withFix(
            'sha256 without an artifact pins nothing',
            "name the .deb in artifact, or remove sha256 to install from the host's apt sources",
          )
        : withFix('the .deb artifact has no sha256', 'add sha256: <hex sha256 of the .deb> (sha256sum prints it)'),
  });
}

const fields = {
  name: packageName.describe(
    'The Debian package name (lower case letters, digits, "+", "-", ".", two or more, starting with a letter or digit); its target is package:<name>.',
  ),
  version: debianVersion.describe(
    'The exact version dpkg must report installed, spelled as dpkg reports it ([epoch:]upstream[-revision], such as "1.22.1-9").',
  ),
  artifact: artifactRef
    .describe(
      "A .deb of exactly that package and version: a path under the fleet directory, an absolute path or an http(s) URL. Without it, from the host's apt sources.",
    )
    .optional(),
  sha256: sha256Field.describe('Hex sha256 of the .deb; required with artifact, and only with it.').optional(),
};

export const packageSpec = exactly<PackageSpec>()(z.strictObject({ type: z.literal('package'), ...fields }).superRefine(paired));

/** A package.install's write spec, as the agent reads it: the same fields and checks, without the type. */
export const packageInstallSpec = z.strictObject(fields).superRefine(paired);
