// The search attribute keys live in the shared contract; re-exported for the test helpers.
export {
  DATUM_SEARCH_ATTRIBUTES,
  DatumConditions,
  DatumDigest,
  DatumGeneration,
  DatumMode,
  DatumNode,
  DatumStatus,
} from '../../src/contract';
