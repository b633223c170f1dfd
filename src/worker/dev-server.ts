import { DATUM_SEARCH_ATTRIBUTES } from '../contract';

/*
 * What `temporal server start-dev` needs for Datum: its search attributes, and limits sized for a
 * fleet. Every node's agent holds a long poll on its own task queue, so a 1000-node fleet is
 * 1000 task queues and 1000 concurrent polls, where the server's defaults assume a few busy
 * queues: 4 partitions per queue (which on one host only forward polls and tasks between
 * themselves), at most 1200 concurrent long polls per namespace, and request rates that
 * 1000 idle pollers alone approach. Production servers need the same: see
 * deploy/temporal/dynamicconfig/production.yaml.
 */

const SA_TYPE: Record<string, string> = { KEYWORD: 'Keyword', INT: 'Int', KEYWORD_LIST: 'KeywordList' };

/** Dynamic config for a fleet of up to about 4000 nodes on one dev server. */
export const FLEET_DYNAMIC_CONFIG: Record<string, number> = {
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
  'frontend.namespaceCount': 10_000,
  'frontend.namespaceRPS': 20_000,
  'frontend.rps': 20_000,
  'matching.namespaceRPS': 20_000,
  'matching.rps': 20_000,
  'history.namespaceRPS': 20_000,
  'history.rps': 20_000,
};

/** The `start-dev` flags that register Datum's search attributes and apply FLEET_DYNAMIC_CONFIG. */
export function devServerFlags(): string[] {
  return [
    ...DATUM_SEARCH_ATTRIBUTES.flatMap((k) => ['--search-attribute', `${k.name}=${SA_TYPE[k.type]}`]),
    ...Object.entries(FLEET_DYNAMIC_CONFIG).flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${value}`]),
  ];
}
