import type { Json } from './canonical';
import type { ResourceSpec } from '../contract/desired';
import type { ObservedResource } from '../contract/observation';
import type { Mode, Ownership, ResourceType } from '../contract/vocabulary';

/** One resource_key as this pass sees it: who owns it, what should be, what is (src/domain/classify.ts). */
export interface Assessment {
  resource_key: string;
  type: ResourceType | null;
  ownership: Ownership;
  ownership_provenance: Json;
  /** Why the ownership is what it is, in words (for UNKNOWN it is the condition's message). */
  ownership_reason: string;
  spec: ResourceSpec | null;
  desired: Json;
  observed: ObservedResource | null;
  drift: boolean;
  effective_mode: Mode;
}
