import { z } from 'zod';
import type { ResourceSpec } from '../../contract/desired';
import type { ResourceType } from '../../contract/vocabulary';
import { exactly } from '../base';
import { directorySpec } from './directory';
import { fileSpec } from './file';
import { flagSpec } from './flag';
import { packageSpec } from './package';
import { releaseSpec } from './release';
import { serviceSpec } from './service';
import { unitSpec } from './unit';

/*
 * Each resource type's spec as desired state writes it, one file per type, in one table that is
 * total over the contract's RESOURCE_TYPES (a type without its schema does not compile), and the
 * union desired-state validation parses with.
 */

type SchemaOf<T extends ResourceType> = z.ZodType<Extract<ResourceSpec, { type: T }>>;

export const RESOURCE_SCHEMAS: { readonly [T in ResourceType]: SchemaOf<T> } = {
  release: releaseSpec,
  file: fileSpec,
  service: serviceSpec,
  flag: flagSpec,
  directory: directorySpec,
  package: packageSpec,
  unit: unitSpec,
};

export const resourceSpec = exactly<ResourceSpec>()(
  z.discriminatedUnion('type', [releaseSpec, fileSpec, serviceSpec, flagSpec, directorySpec, packageSpec, unitSpec]),
);

export { releaseSpec } from './release';
export { packageInstallSpec } from './package';
