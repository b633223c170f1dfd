// Compiles src/ to dist/ before any test file runs, so tests that spawn the real `datum`
// command (bin/datum.js → dist/) run the code under test, never a stale build.
export default async function setup(): Promise<void> {
  const { build } = await import('../scripts/build.mjs');
  build();
}
