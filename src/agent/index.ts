/*
 * The node agent (`datum agent`): a Temporal worker per process on task queues datum-node-<node>,
 * whose activities observe each node from the things themselves and carry out authorized actions
 * after refusals of its own. Its parts, in wings:
 *
 *   worker.ts       runAgents: one worker per agent.yaml, the root each one serves held
 *   activities/     observe, apply (its refusals and write checks in numbered steps), recordDecision
 *   providers/      one provider per resource type, in one table (providers/index.ts)
 *   fs/             the only code that touches a node's root: held descriptors, path rules,
 *                   atomic replace, unpack (one entry module, fs/index.ts)
 *   node/           the per-node records under <root>/.datum/: claims and decisions, the journal
 *                   and fence, the root's holder, fence resets, watch tokens, retention, the lock
 *   services/       the processes the agent starts for `service` resources (process or systemd)
 *   dpkg/           the host's package manager for `package` resources: dpkg-query, dpkg-deb,
 *                   dpkg and apt-get, always on agent.yaml's packages.root, never a node root
 *   units/          systemd units for `unit` resources: systemctl, Datum's unit files, evidence, probes
 *   watch.ts        watch: returns as soon as something managed changes
 *   config.ts       agent.yaml, read on every call
 *   users.ts        owners and groups by name or id, through getent (the host's name service)
 *   gate.ts, heartbeat.ts, logging.ts, metrics.ts, limits.ts, markers.ts, refusal.ts
 *
 * `node:fs` is imported only in fs/ and in these files, each for a reason (eslint.config.mjs
 * holds the same list, and test/unit/agent-zones.test.ts checks the two agree):
 *
 *   dpkg/busy.ts           reads /proc/locks and stats dpkg's lock files under packages.root: whether a dpkg works there
 *   services/identity.ts   reads /proc/<pid>/ to know a service's process: the kernel's, not a root's
 *   services/systemd.ts    reads /proc/1/comm and /run/systemd/system: whether systemd runs the host
 *
 * Type-only imports of node:fs (its Stats) are allowed everywhere: providers/file.ts,
 * providers/attributes.ts, providers/imports.ts and markers.ts import only `type { Stats }`, to
 * judge what fs/ has already read; none of them touches the filesystem.
 */

export { runAgents } from './worker';
