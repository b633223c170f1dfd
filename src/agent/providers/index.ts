import type { ResourceSpec, ResourceType } from '../../domain';
import { directoryProvider } from './directory';
import { fileProvider } from './file';
import { flagProvider } from './flag';
import { packageProvider } from './package';
import { releaseProvider } from './release';
import { serviceProvider } from './service';
import { unitProvider } from './unit';
import type { Provider } from './types';

/*
 * The agent's providers, one per resource type: observe, apply, the target an action touches and
 * what the watch listens to are looked up here, never switched on. A type missing here does not
 * compile (the table is total over src/contract/vocabulary.ts's RESOURCE_TYPES), and
 * test/unit/resource-tables.test.ts checks it against the domain's table (src/domain/resources).
 */

type ProviderOf<T extends ResourceType> = Provider<Extract<ResourceSpec, { type: T }>>;

export const PROVIDERS: { readonly [T in ResourceType]: ProviderOf<T> } = {
  release: releaseProvider,
  file: fileProvider,
  flag: flagProvider,
  service: serviceProvider,
  package: packageProvider,
  unit: unitProvider,
  directory: directoryProvider,
};

/** The provider of a resource type; null for a type this agent does not know (a newer controller's). */
export function providerFor(type: string): Provider | null {
  return Object.hasOwn(PROVIDERS, type) ? PROVIDERS[type as ResourceType] : null;
}

/** The provider that carries out an action kind; null for an action no provider of this agent carries out. */
export function providerOfAction(kind: string): Provider | null {
  return Object.values(PROVIDERS).find((p) => (p.actions as readonly string[]).includes(kind)) ?? null;
}

export type { ApplyResult, AtWrite, NodeContext, Provider } from './types';
