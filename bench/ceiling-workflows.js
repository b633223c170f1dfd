// The engine's ceiling for the bench: a workflow that runs the same activities a repair pass
// runs (observe, three applies, observe) but whose activities do nothing.
'use strict';
const { proxyActivities } = require('@temporalio/workflow');

const acts = proxyActivities({ startToCloseTimeout: '1m' });

async function noopPass(applies) {
  await acts.noop();
  for (let i = 0; i < applies; i++) await acts.noop();
  await acts.noop();
}

module.exports = { noopPass };
