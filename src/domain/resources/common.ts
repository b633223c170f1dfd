import { canonicalJson, type Json } from '../canonical';
import { clip } from '../bounds';
import { lengthProblem, pathSegments, pathSpellingProblem } from '../rootPath';

/*
 * What several resource types share: how a path under the root names its target, and how
 * structured content becomes the bytes a file holds.
 */

/** The exact bytes a file resource writes: text as given, structured content as sorted, indented JSON. */
export function fileBytes(content: string | Json): string {
  if (typeof content === 'string') return content;
  return `${JSON.stringify(JSON.parse(canonicalJson(content)), null, 2)}\n`;
}

/** A path's target of type `kind` ("file", "directory"): its path under the root, separators normalised to "/". */
export function pathTarget(kind: string, path: string): string {
  return `${kind}:${pathSegments(path).join('/')}`;
}

/** Why `rest` is no path target of type `kind` as Datum names it; null when it is one. */
export function pathTargetProblem(kind: string, entry: string, rest: string): string | null {
  if (pathTarget(kind, rest) !== entry) return `"${entry}" is not spelled as Datum names it (${pathTarget(kind, rest)})`;
  if (pathSegments(rest).some((s) => s === '' || s === '.' || s === '..' || rest.startsWith('/')))
    return `"${entry}" is not a plain path under the node root`;
  if (pathSpellingProblem(rest) !== null) return `"${clip(entry, 60)}" names a path Datum cannot write: ${lengthProblem(rest)}`;
  return null;
}
