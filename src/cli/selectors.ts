import { DesiredStateAuthority } from '../activities/authority';
import { mapLimit } from '../activities/map-limit';
import { parseSelector, readsLabels, selects, type Labels, type Selector } from '../domain/selector';
import { UsageError, withFix } from './errors';

/*
 * `--selector` on nodes, status, rollout and work list (docs/operations.md, "Labels and
 * selectors"): which nodes, by name pattern or by the labels desired state gives them. A label is
 * declared in the authority (desired/nodes/<node>.yaml `labels:`), so a selector that reads
 * labels reads the fleet directory; one by name alone needs none.
 */

export function selectorFlag(text: string | undefined): Selector | null {
  if (text === undefined) return null;
  const parsed = parseSelector(text);
  if (!parsed.ok) throw new UsageError(`--selector: ${parsed.error}`);
  return parsed.selector;
}

/** Each node's labels as the authority declares them; a node whose file does not read has none. */
export async function labelsFrom(fleetDir: string, nodes?: string[]): Promise<Map<string, Labels>> {
  const authority = new DesiredStateAuthority(fleetDir);
  const names = nodes ?? (await authority.nodes());
  const labels = await mapLimit(names, 16, async (node) => {
    const read = await authority.read(node);
    return [node, read.ok ? (read.intent.labels ?? {}) : {}] as const;
  });
  return new Map(labels);
}

/** The fleet directory labels are read from, or a usage error saying what needs them. */
export function fleetForLabels(what: string, fleetDir: string | null): string {
  if (fleetDir === null)
    throw new UsageError(
      withFix(
        `${what} reads node labels, which the authority declares`,
        'pass --fleet DIR or set DATUM_FLEET (or select by name: name=web-*)',
      ),
    );
  return fleetDir;
}

/** Where labels come from for this selector: the fleet directory (null when it reads none), or a usage error. */
export function fleetForSelector(selector: Selector, fleetDir: string | null): string | null {
  return readsLabels(selector) ? fleetForLabels(`--selector ${selector.text}`, fleetDir) : null;
}

/** A predicate on node names: the selector with the labels it needs, read once. */
export async function nodeMatcher(selector: Selector | null, fleetDir: string | null): Promise<(node: string) => boolean> {
  if (selector === null) return () => true;
  const dir = fleetForSelector(selector, fleetDir);
  const labels = dir === null ? new Map<string, Labels>() : await labelsFrom(dir);
  return (node) => selects(selector, node, labels.get(node) ?? {});
}
