// Whether this run is CI's: CI set to 1, true or yes, in any case. One answer for the set-up
// (scripts/setup.mjs: npm ci instead of npm install) and the tests (CI's case counts, no silent
// skip). CommonJS so that both the ES module set-up, which runs before node_modules exists, and
// the CommonJS test files load it without an await.
'use strict';

/** @param {NodeJS.ProcessEnv} [env] */
function isCI(env = process.env) {
  return /^(1|true|yes)$/i.test(env.CI ?? '');
}

module.exports = { isCI };
