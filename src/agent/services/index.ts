/*
 * The processes the agent manages, behind the `service` provider. Each service started under a
 * root has a state file <root>/.datum/services/<key>.json = {pid, port, start_ticks, command,
 * started_at, …} and a log <root>/.datum/services/<key>.log.
 *
 *   state.ts     the state file and the intent record under .datum/services
 *   identity.ts  whether a recorded pid is still the instance Datum started (/proc, or systemd)
 *   launch.ts    starting an instance: its port, environment and log
 *   adopt.ts     the instance of a launch the agent did not live to record
 *   exits.ts     the exit of an instance the agent spawned itself, as an event
 *   log.ts       keeping a service log under its cap
 *   health.ts    asking a service's /health what it runs
 *   stop.ts      stopping an instance, only once it is proved ours
 *   systemd.ts   the systemd backend: transient units instead of the agent's own children
 *
 * The nonce the agent puts in an instance's environment (DATUM_SERVICE_NONCE) proves it ours, and
 * also closes the gap between spawning and recording: an intent record (<key>.intent.json, with
 * the nonce) is written before the spawn, so an agent killed after the spawn finds the live
 * process carrying that nonce on retry and adopts it instead of starting a second instance.
 *
 * With agent.yaml's `services: { backend: systemd }` the instance is a transient systemd unit
 * instead: the state file then also names the unit and its invocation, and identity, stopping and
 * adoption ask systemd. How an instance was started is recorded with it, so a service started
 * under one backend is stopped by that backend after a switch.
 */

export { adoptInterrupted } from './adopt';
export { onChildExit } from './exits';
export { probeHealth, waitHealthy, type Health } from './health';
export { startTicks, unverified, verifyIdentity } from './identity';
export { launch } from './launch';
export { capServiceLog } from './log';
export { describeInstance, readServiceRecord, readServiceState, type ServiceState } from './state';
export { stopInstance, stopServices } from './stop';
