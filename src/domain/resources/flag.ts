import type { FlagSpec } from '../../contract/desired';
import { stringField, type ResourceKind } from './kind';

/* flag: a JSON value at flags/<name>.json, named after its resource key (null when absent). */

export const flag: ResourceKind<FlagSpec> = {
  order: 2,
  actions: ['flag.write'],
  destructive: ['flag.delete'],
  target: (key) => `flag:${key}`,
  targetOfAction: (key, spec) => `flag:${stringField(spec, 'name') ?? key}`,
  targetIsKey: true,
  targetIsPath: false,
  absenceIsFailure: false,
  targetNameProblem: () => null,
  desiredValue: (_key, spec) => spec.value,
  written: (_key, spec) => spec.value,
  writtenByAction: (_kind, spec) => spec.value,
  valueAfter: (_kind, spec) => spec.value ?? null,
  plan: (a, spec) => ({ action: 'flag.write', spec: { name: a.resource_key, value: spec.value } }),
  dependencies: () => [],
  references: () => [],
};
